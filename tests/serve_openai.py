"""The official `openai` client against `domino serve`, unchanged: chat with response_format
json_schema, streaming, tools, and domino's own request object through `extra_body`.

Usage: serve_openai.py BASE_URL   (run by tests/serve_openai.rs with the venv scripts/setup makes)
"""

import json
import sys

from openai import OpenAI

base_url = sys.argv[1]
client = OpenAI(base_url=base_url + "/v1", api_key="sk-domino-test")
messages = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Describe a person as JSON with a name and an age."},
]

# The model list.
models = client.models.list()
model = models.data[0].id

# response_format json_schema: the content parses and fits the schema.
schema = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
r = client.chat.completions.create(
    model=model,
    messages=messages,
    max_tokens=48,
    temperature=0,
    response_format={"type": "json_schema", "json_schema": {"name": "person", "strict": True, "schema": schema}},
)
doc = json.loads(r.choices[0].message.content)
assert set(doc) == {"name", "age"}, doc
assert isinstance(doc["name"], str) and len(doc["name"]) <= 12, doc
assert isinstance(doc["age"], int) and 0 <= doc["age"] <= 150, doc
assert r.usage.completion_tokens > 0

# Streaming: the deltas join to the non-streamed text of the same request.
plain = client.chat.completions.create(model=model, messages=messages, max_tokens=24, temperature=0.8, seed=5)
chunks = list(
    client.chat.completions.create(
        model=model,
        messages=messages,
        max_tokens=24,
        temperature=0.8,
        seed=5,
        stream=True,
        stream_options={"include_usage": True},
    )
)
joined = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
assert joined == plain.choices[0].message.content, (joined, plain.choices[0].message.content)
assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == plain.usage.completion_tokens

# Tools with tool_choice "required": a call whose arguments fit the parameters.
tools = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["C", "F"]}},
                "required": ["city", "unit"],
                "additionalProperties": False,
            },
        },
    }
]
r = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "What is the weather in Paris?"}],
    max_tokens=48,
    temperature=0,
    tools=tools,
    tool_choice="required",
)
choice = r.choices[0]
assert choice.finish_reason == "tool_calls", choice
call = choice.message.tool_calls[0]
assert call.type == "function" and call.function.name == "get_weather", call
args = json.loads(call.function.arguments)
assert set(args) == {"city", "unit"} and args["unit"] in ("C", "F") and len(args["city"]) <= 20, args

# domino's own options travel in extra_body.
r = client.completions.create(model=model, prompt="Three digits:", max_tokens=8, extra_body={"domino": {"regex": "[0-9]{3}"}})
text = r.choices[0].text
assert len(text) == 3 and text.isdigit(), text

# Errors come back as the client's exceptions, with the server's reason.
try:
    client.chat.completions.create(
        model=model,
        messages=messages,
        response_format={"type": "json_schema", "json_schema": {"name": "bad", "schema": {"type": "strin"}}},
    )
    raise AssertionError("a bad schema was accepted")
except Exception as e:  # openai.BadRequestError
    assert getattr(e, "status_code", None) == 400, e
    assert "strin" in str(e), e

print("ok")
