//! Few-shot prompts: deterministic for a seed, laid out as `Q: … \n A: …` with the shipped
//! templates; throughput prompt lists and manifest load. Needs ../shared/data (fails loudly
//! without it).

use domino::eval::Task;
use domino::eval::data::{Dataset, Split, default_path};
use domino::eval::prompt::{FewShotPrompt, JsonStyle, Template, choose_demos, load_prompt_list};
use domino::eval::throughput::{Manifest, PromptSource, workload_prompts};

fn train(task: Task) -> Dataset {
    let path = default_path(task, Split::Train);
    Dataset::load(task, &path)
        .unwrap_or_else(|e| panic!("evaluation data is required for this test: {e:#}"))
}

fn build(task: Task, data: &Dataset, k: usize, seed: u64) -> FewShotPrompt {
    FewShotPrompt::build(
        Template::for_task(task).unwrap(),
        data,
        k,
        seed,
        JsonStyle::Pretty,
    )
    .unwrap()
}

#[test]
fn demonstrations_are_deterministic_for_a_seed() {
    for task in Task::ALL {
        let data = train(task);
        let a = build(task, &data, 5, 7);
        let b = build(task, &data, 5, 7);
        assert_eq!(a.demo_ids, b.demo_ids);
        assert_eq!(a.prefix, b.prefix);
        assert_eq!(a.prompt_id(), b.prompt_id());
        assert_eq!(a.demo_ids.len(), 5);
        let mut unique = a.demo_ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 5, "demonstrations are distinct");

        let c = build(task, &data, 5, 8);
        assert_ne!(
            a.demo_ids, c.demo_ids,
            "another seed draws other demonstrations"
        );
        assert_ne!(a.prompt_id(), c.prompt_id());
    }
}

#[test]
fn pinned_draw_for_seed_zero() {
    // Pins the RNG stream and the eligibility filter: changing either changes every prompt, and
    // with it every committed result, so it must be a deliberate change.
    let data = train(Task::Gsm8k);
    let first = choose_demos(&data, 5, 0).unwrap();
    assert_eq!(first, [7435, 2765, 192, 2203, 4458]);
    assert_eq!(
        choose_demos(&train(Task::Conll), 5, 0).unwrap(),
        [3621, 12675, 1607, 5589, 8788]
    );
    let more = choose_demos(&data, 8, 0).unwrap();
    assert_eq!(
        &more[..5],
        &first[..],
        "drawing more keeps the first K (partial Fisher-Yates)"
    );
}

#[test]
fn gsm8k_prompt_layout() {
    let data = train(Task::Gsm8k);
    let p = build(Task::Gsm8k, &data, 5, 0);
    let Dataset::Gsm8k(v) = &data else {
        unreachable!()
    };
    let prompt = p.gsm8k_prompt(&v[0]);
    assert!(prompt.starts_with("Solve each math problem"));
    assert_eq!(
        prompt.matches("\nQ: ").count(),
        6,
        "5 demonstrations + the query:\n{prompt}"
    );
    assert_eq!(
        prompt.matches("\nA: {\n    \"thoughts\": [").count(),
        5,
        "pretty JSON answers as in Listing 8"
    );
    assert!(
        prompt.ends_with(&format!("Q: {}\nA:", v[0].question)),
        "ends with the query and `A:`"
    );
    for &id in &p.demo_ids {
        assert!(p.prefix.contains(&v[id].question));
    }
}

#[test]
fn conll_prompt_presents_the_token_list() {
    let data = train(Task::Conll);
    let p = build(Task::Conll, &data, 3, 1);
    let Dataset::Conll(v) = &data else {
        unreachable!()
    };
    let prompt = p.conll_prompt(&v[0]);
    assert!(
        prompt.ends_with("Q: [\"EU\", \"rejects\", \"German\", \"call\", \"to\", \"boycott\", \"British\", \"lamb\", \".\"]\nA:"),
        "{prompt}"
    );
    assert_eq!(
        prompt.matches("\"tag\": ").count(),
        p.demo_ids.iter().map(|&i| v[i].tokens.len()).sum::<usize>()
    );
    let compact = FewShotPrompt::build(
        Template::for_task(Task::Conll).unwrap(),
        &data,
        3,
        1,
        JsonStyle::Compact,
    )
    .unwrap();
    assert!(compact.prefix.contains("A: {\"tokens\":[{\"token\":"));
}

#[test]
fn zero_shots_is_instruction_and_query() {
    let data = train(Task::Gsm8k);
    let p = build(Task::Gsm8k, &data, 0, 0);
    assert!(p.demo_ids.is_empty());
    assert_eq!(p.prompt_for("What is 2+2?").matches("Q: ").count(), 1);
}

#[test]
fn throughput_prompts_and_manifest() {
    let manifest = Manifest::load_default().unwrap();
    let names: Vec<&str> = manifest.workloads.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["json", "gsm8k-schema", "c", "xml", "rpg-template"]);
    assert_eq!(
        (manifest.max_tokens, manifest.reps, manifest.warmup),
        (128, 100, 10)
    );
    for w in &manifest.workloads {
        let prompts = workload_prompts(w, 0).unwrap();
        assert!(prompts.len() >= 5, "{}: {} prompts", w.name, prompts.len());
        if let PromptSource::File(path) = &w.prompts {
            assert_eq!(
                load_prompt_list(&domino::eval::resolve(path)).unwrap(),
                prompts
            );
        }
    }
    let c = load_prompt_list(&domino::eval::resolve("prompts/throughput/c.txt")).unwrap();
    assert_eq!(c[0], "A C program that prints \"Hello, world!\":\n```c\n");
}
