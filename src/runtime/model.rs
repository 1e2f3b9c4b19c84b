//! A loaded GGUF model: weights, tokenizer, chat template, and its [`Vocabulary`].
//!
//! The vocabulary is built from llama.cpp's own view of the tokens so that the engine's
//! masks match exactly what the model can emit: `bytes(t)` is `llama_token_to_piece(t)`
//! (byte-level BPE pieces decoded through the GPT-2 byte map, SentencePiece `▁` as a space,
//! byte-fallback tokens `<0xNN>` as the single byte `0xNN`, partial UTF-8 pieces kept as raw
//! bytes). Control, unused and unknown tokens get empty bytes and are special; every id for
//! which `llama_vocab_is_eog` holds is an end-of-generation token.

use super::device::{CpuReason, Offload, gpu_devices};
use super::{RuntimeError, Session, SessionOptions, SharedSession, backend};
use crate::vocab::{TokenId, Tokenize, Vocabulary};
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token_type::LlamaTokenAttr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// How to load a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelOptions {
    /// Layers to offload to the GPU. `u32::MAX` means all of them. Ignored (0) in CPU builds.
    pub n_gpu_layers: u32,
}

impl Default for ModelOptions {
    /// All layers on the GPU when built with a GPU feature, none otherwise.
    fn default() -> Self {
        ModelOptions {
            n_gpu_layers: if super::GPU_BUILD { u32::MAX } else { 0 },
        }
    }
}

/// One turn of a chat, for [`Model::apply_chat_template`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage {
            role: "user".into(),
            content: content.into(),
        }
    }
    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage {
            role: "system".into(),
            content: content.into(),
        }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        ChatMessage {
            role: "assistant".into(),
            content: content.into(),
        }
    }
}

/// A GGUF model loaded through llama.cpp.
pub struct Model {
    inner: Arc<LlamaModel>,
    path: PathBuf,
    offload: Offload,
    vocabulary: OnceLock<Arc<Vocabulary>>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("path", &self.path)
            .field("n_vocab", &self.n_vocab())
            .finish()
    }
}

/// Check the file exists and starts with the GGUF magic before llama.cpp sees it: llama.cpp
/// only answers "null" on failure, so these checks are what makes the common errors clear.
fn check_gguf(path: &Path) -> Result<(), RuntimeError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RuntimeError::ModelNotFound(path.to_path_buf()));
        }
        Err(e) => {
            return Err(RuntimeError::LoadFailed {
                path: path.to_path_buf(),
                reason: e.to_string(),
            });
        }
    };
    if !meta.is_file() {
        return Err(RuntimeError::NotGguf {
            path: path.to_path_buf(),
            reason: "not a regular file".into(),
        });
    }
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic));
    match read {
        Ok(()) if &magic == b"GGUF" => Ok(()),
        Ok(()) => Err(RuntimeError::NotGguf {
            path: path.to_path_buf(),
            reason: format!(
                "it starts with {:?}, not the magic bytes \"GGUF\"",
                String::from_utf8_lossy(&magic)
            ),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(RuntimeError::NotGguf {
            path: path.to_path_buf(),
            reason: "the file is shorter than 4 bytes".into(),
        }),
        Err(e) => Err(RuntimeError::LoadFailed {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }),
    }
}

fn load_llama_model(path: &Path, params: &LlamaModelParams) -> Result<LlamaModel, RuntimeError> {
    check_gguf(path)?;
    let backend = backend()?;
    LlamaModel::load_from_file(backend, path, params).map_err(|e| RuntimeError::LoadFailed {
        path: path.to_path_buf(),
        reason: format!(
            "{e} (truncated file or unsupported architecture? run with -vv to see llama.cpp's log)"
        ),
    })
}

/// Mesa 22.3's software Vulkan device (lavapipe, "llvmpipe" in its description) crashes when
/// a compute pipeline is created while its queue thread still executes earlier work — which
/// ggml-vulkan's lazy pipeline compilation does unless it waits for every submission
/// (docs/vulkan-lavapipe-crash.md has the backtraces). So when the devices about to be used
/// include lavapipe and the user has not chosen, `GGML_VK_SERIALIZE_SUBMISSIONS=1` is set
/// before the model loads (ggml reads it when it first initialises a device, which loading
/// the model does). Real GPUs are not affected and do not get it.
fn serialize_submissions_on_lavapipe(devices: &[super::device::Device]) {
    const VAR: &str = "GGML_VK_SERIALIZE_SUBMISSIONS";
    let lavapipe = devices
        .iter()
        .any(|d| d.backend.eq_ignore_ascii_case("vulkan") && d.description.starts_with("llvmpipe"));
    if lavapipe && std::env::var_os(VAR).is_none() {
        // SAFETY: set once, before the first model is put on the device; glibc's setenv
        // never frees a value another thread's getenv may hold, and nothing of ours reads
        // this variable.
        unsafe { std::env::set_var(VAR, "1") };
    }
}

impl Model {
    /// Load the weights and vocabulary of a GGUF file.
    ///
    /// In a GPU build `options.n_gpu_layers` layers go to the GPU devices llama.cpp found;
    /// with none found the model runs on the CPU and a warning goes to stderr. With
    /// `n_gpu_layers == 0` no GPU device is used at all (weights, KV cache and compute on
    /// the CPU). [`Model::offload`] says what happened.
    pub fn load(path: impl AsRef<Path>, options: ModelOptions) -> Result<Model, RuntimeError> {
        let path = path.as_ref();
        let requested = if super::GPU_BUILD {
            options.n_gpu_layers
        } else {
            0
        };
        let (devices, cpu_reason) = if !super::GPU_BUILD {
            (Vec::new(), Some(CpuReason::CpuBuild))
        } else if requested == 0 {
            (Vec::new(), Some(CpuReason::NoLayersRequested))
        } else {
            check_gguf(path)?;
            let devices = gpu_devices()?;
            if devices.is_empty() {
                eprintln!(
                    "warning: built with GPU offload ({}) but llama.cpp found no usable GPU device: \
                     running on the CPU (pass --n-gpu-layers 0 to silence this; a software Vulkan \
                     device is used only when GGML_VK_VISIBLE_DEVICES names it)",
                    super::device::compiled_backends()[1..].join(", ")
                );
                (devices, Some(CpuReason::NoDevice))
            } else {
                serialize_submissions_on_lavapipe(&devices);
                (devices, None)
            }
        };
        let n_gpu_layers = if devices.is_empty() { 0 } else { requested };
        let mut params = LlamaModelParams::default().with_n_gpu_layers(n_gpu_layers);
        if super::GPU_BUILD && n_gpu_layers == 0 {
            // No devices at all (an empty, null-terminated list): nothing touches the GPU.
            params = params
                .with_devices(&[])
                .map_err(|e| RuntimeError::Backend(e.to_string()))?;
        }
        let inner = load_llama_model(path, &params)?;
        let total = inner.n_layer() + 1;
        let layers = n_gpu_layers.min(total);
        let offload = Offload {
            layers,
            total,
            devices: if layers > 0 { devices } else { Vec::new() },
            cpu_reason,
        };
        Ok(Model {
            inner: Arc::new(inner),
            path: path.to_path_buf(),
            offload,
            vocabulary: OnceLock::new(),
        })
    }

    /// Where the model's layers are (GPU devices and how many layers, or why the CPU).
    pub fn offload(&self) -> &Offload {
        &self.offload
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The model's name from its metadata (`general.name`), else the file name.
    pub fn name(&self) -> String {
        self.inner.meta_val_str("general.name").unwrap_or_else(|_| {
            self.path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
    }

    pub fn n_vocab(&self) -> usize {
        self.inner.n_vocab().max(0) as usize
    }

    /// The context length the model was trained with.
    pub fn n_ctx_train(&self) -> u32 {
        self.inner.n_ctx_train()
    }

    pub fn n_layer(&self) -> u32 {
        self.inner.n_layer()
    }

    /// The underlying llama-cpp-2 model (for baselines that use llama.cpp's own samplers).
    pub fn llama(&self) -> &LlamaModel {
        &self.inner
    }

    /// The vocabulary (built once, then shared), with llama's tokenizer attached.
    pub fn vocabulary(&self) -> Arc<Vocabulary> {
        self.vocabulary
            .get_or_init(|| Arc::new(build_vocabulary(&self.inner)))
            .clone()
    }

    /// The beginning-of-sequence token, and whether the model wants it prepended to prompts.
    pub fn bos(&self) -> (TokenId, bool) {
        let v = self.inner.vocab();
        (TokenId(v.bos().0 as u32), v.should_add_bos())
    }

    /// Tokenize text. `add_bos`: prepend BOS when the model asks for it (GGUF
    /// `add_bos_token`); `parse_special`: turn control-token text such as `<|im_start|>` into
    /// the control token (wanted for chat-template output, not for user text).
    pub fn tokenize(&self, text: &str, add_bos: bool, parse_special: bool) -> Vec<TokenId> {
        tokenize_with(&self.inner, text, add_bos, parse_special)
    }

    /// Bytes of a token sequence as llama.cpp joins them (control tokens render as nothing).
    pub fn detokenize(&self, tokens: &[TokenId]) -> Result<Vec<u8>, RuntimeError> {
        let n_vocab = self.n_vocab();
        let ids = tokens
            .iter()
            .map(|t| {
                if t.index() < n_vocab {
                    Ok(LlamaToken(t.0 as i32))
                } else {
                    Err(RuntimeError::TokenOutOfRange {
                        token: t.0,
                        n_vocab,
                    })
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.inner.vocab().detokenize(&ids, false, false))
    }

    /// The chat template stored in the GGUF file.
    pub fn chat_template(&self) -> Result<String, RuntimeError> {
        match self.inner.chat_template(None) {
            Ok(t) => t
                .to_string()
                .map_err(|e| RuntimeError::ChatTemplate(e.to_string())),
            Err(_) => Err(RuntimeError::NoChatTemplate { model: self.name() }),
        }
    }

    /// Render messages with the model's chat template; `add_assistant` opens the assistant
    /// turn so that generation continues as the assistant.
    pub fn apply_chat_template(
        &self,
        messages: &[ChatMessage],
        add_assistant: bool,
    ) -> Result<String, RuntimeError> {
        let template = self
            .inner
            .chat_template(None)
            .map_err(|_| RuntimeError::NoChatTemplate { model: self.name() })?;
        let messages = messages
            .iter()
            .map(|m| LlamaChatMessage::new(m.role.clone(), m.content.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                RuntimeError::ChatTemplate(format!("a message contains a NUL byte: {e}"))
            })?;
        self.inner
            .apply_chat_template(&template, &messages, add_assistant)
            .map_err(|e| {
                RuntimeError::ChatTemplate(format!(
                    "{e} (llama.cpp does not recognise this model's template)"
                ))
            })
    }

    /// Prompt tokens for `text`: wrapped in the chat template as one user turn when `chat`,
    /// BOS prepended when the model asks for it (once, even if the template already has it).
    pub fn prompt_tokens(&self, text: &str, chat: bool) -> Result<Vec<TokenId>, RuntimeError> {
        if !chat {
            return Ok(self.tokenize(text, true, false));
        }
        self.chat_tokens(&[ChatMessage::user(text)])
    }

    /// Prompt tokens for a conversation (a system prompt, earlier turns), rendered with the
    /// chat template and the assistant's turn opened; BOS once, as in [`Model::prompt_tokens`].
    pub fn chat_tokens(&self, messages: &[ChatMessage]) -> Result<Vec<TokenId>, RuntimeError> {
        let rendered = self.apply_chat_template(messages, true)?;
        let mut tokens = self.tokenize(&rendered, true, true);
        let (bos, _) = self.bos();
        if tokens.len() >= 2 && tokens[0] == bos && tokens[1] == bos {
            tokens.remove(0);
        }
        Ok(tokens)
    }

    /// A new context (KV cache) over this model.
    pub fn session(&self, options: SessionOptions) -> Result<Session<'_>, RuntimeError> {
        Session::new(self, options)
    }

    /// A context whose KV cache holds `n_seq` sequences decoded together (server slots
    /// with continuous batching); `options.n_ctx` is split evenly between them.
    pub fn shared_session(
        &self,
        options: SessionOptions,
        n_seq: usize,
    ) -> Result<SharedSession<'_>, RuntimeError> {
        SharedSession::new(self, options, n_seq)
    }
}

fn tokenize_with(
    model: &LlamaModel,
    text: &str,
    add_bos: bool,
    parse_special: bool,
) -> Vec<TokenId> {
    if text.is_empty() && !add_bos {
        return Vec::new();
    }
    model
        .vocab()
        .tokenize(text.as_bytes(), add_bos, parse_special)
        .into_iter()
        .map(|t| TokenId(t.0 as u32))
        .collect()
}

/// llama.cpp's tokenizer as a [`Tokenize`]: plain text, no BOS, special-token text kept as text.
struct LlamaTokenizer(Arc<LlamaModel>);

impl Tokenize for LlamaTokenizer {
    fn tokenize(&self, text: &str) -> anyhow::Result<Vec<TokenId>> {
        Ok(tokenize_with(&self.0, text, false, false))
    }
}

fn build_vocabulary(model: &Arc<LlamaModel>) -> Vocabulary {
    let vocab = model.vocab();
    let n = vocab.n_tokens().max(0);
    let mut tokens = Vec::with_capacity(n as usize);
    let mut special = Vec::with_capacity(n as usize);
    let mut eog = Vec::new();
    for id in 0..n {
        let token = LlamaToken(id);
        let attr = vocab.attr(token);
        let never_text = vocab.is_control(token)
            || attr.contains(LlamaTokenAttr::Control)
            || attr.contains(LlamaTokenAttr::Unused)
            || attr.contains(LlamaTokenAttr::Unknown);
        let bytes = if never_text {
            Vec::new()
        } else {
            vocab.token_to_piece(token, false, None)
        };
        if vocab.is_eog(token) {
            eog.push(TokenId(id as u32));
        }
        tokens.push(bytes);
        special.push(never_text);
    }
    Vocabulary::new(tokens, special, eog).with_tokenizer(Box::new(LlamaTokenizer(model.clone())))
}

/// The vocabulary of a GGUF file without loading its weights (llama.cpp's `vocab_only`).
pub fn load_vocabulary(path: impl AsRef<Path>) -> anyhow::Result<Vocabulary> {
    let params = LlamaModelParams::default()
        .with_vocab_only(true)
        .with_n_gpu_layers(0);
    let model = Arc::new(load_llama_model(path.as_ref(), &params)?);
    Ok(build_vocabulary(&model))
}
