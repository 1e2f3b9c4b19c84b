//! GPU offload: the backends compiled in, the devices llama.cpp sees, and where a loaded
//! model's layers went ([`Offload`]).
//!
//! The cargo features `cuda`, `vulkan` and `metal` build llama.cpp with that backend. A GPU
//! build offloads every layer by default; with no usable device (no driver, or only a
//! software Vulkan device that llama.cpp skips unless `GGML_VK_VISIBLE_DEVICES` names it)
//! [`Model::load`](super::Model::load) falls back to the CPU with a warning.

use super::{RuntimeError, backend};
use llama_cpp_2::{LlamaBackendDeviceType, list_llama_ggml_backend_devices};

/// The llama.cpp backends compiled into this binary: `cpu`, then each GPU feature.
pub fn compiled_backends() -> Vec<&'static str> {
    let mut backends = vec!["cpu"];
    if cfg!(feature = "cuda") {
        backends.push("cuda");
    }
    if cfg!(feature = "vulkan") {
        backends.push("vulkan");
    }
    if cfg!(feature = "metal") {
        backends.push("metal");
    }
    backends
}

/// The llama.cpp this binary runs, for `--version`: the vendoring crate's version and ggml's.
pub fn llama_cpp_version() -> String {
    // SAFETY: ggml_version/ggml_commit return pointers to static NUL-terminated strings.
    let cstr = |p: *const std::os::raw::c_char| {
        if p.is_null() {
            String::new()
        } else {
            unsafe { std::ffi::CStr::from_ptr(p) }
                .to_string_lossy()
                .into_owned()
        }
    };
    let ggml = cstr(unsafe { llama_cpp_sys_2::ggml_version() });
    let commit = cstr(unsafe { llama_cpp_sys_2::ggml_commit() });
    let mut version = format!("{} (ggml {ggml}", super::LLAMA_CPP_VERSION);
    if !commit.is_empty() && commit != "unknown" {
        version.push_str(&format!(", commit {commit}"));
    }
    version.push(')');
    version
}

/// A device llama.cpp can offload layers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// llama.cpp's name for it, e.g. `Vulkan0`, `CUDA0`, `Metal`.
    pub name: String,
    /// What it is, e.g. `llvmpipe (LLVM 15.0.6, 256 bits)`.
    pub description: String,
    /// The backend, e.g. `Vulkan`.
    pub backend: String,
    /// Memory in bytes (total, free) as the driver reports it.
    pub memory_total: usize,
    pub memory_free: usize,
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}, {} MiB free)",
            self.name,
            self.description,
            self.memory_free >> 20
        )
    }
}

/// The GPU devices llama.cpp found (empty in CPU builds, and in GPU builds with no usable
/// device). Initialises the backend.
pub fn gpu_devices() -> Result<Vec<Device>, RuntimeError> {
    backend()?;
    Ok(list_llama_ggml_backend_devices()
        .into_iter()
        .filter(|d| {
            matches!(
                d.device_type,
                LlamaBackendDeviceType::Gpu | LlamaBackendDeviceType::IntegratedGpu
            )
        })
        .map(|d| Device {
            name: d.name,
            description: d.description,
            backend: d.backend,
            memory_total: d.memory_total,
            memory_free: d.memory_free,
        })
        .collect())
}

/// Where a loaded model's layers are: `layers` of `total` on `devices` (llama.cpp counts the
/// output layer as one more than the model's repeating layers, as in its own log line
/// "offloaded 31/31 layers to GPU").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offload {
    pub layers: u32,
    pub total: u32,
    /// The GPU devices the layers went to (empty when `layers == 0`).
    pub devices: Vec<Device>,
    /// Why nothing was offloaded, when `layers == 0`.
    pub cpu_reason: Option<CpuReason>,
}

/// Why a model runs on the CPU only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuReason {
    /// Built without a GPU feature.
    CpuBuild,
    /// `n_gpu_layers` was 0.
    NoLayersRequested,
    /// A GPU build found no usable device.
    NoDevice,
}

impl std::fmt::Display for Offload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.layers == 0 {
            let why = match self.cpu_reason {
                Some(CpuReason::CpuBuild) | None => "CPU build",
                Some(CpuReason::NoLayersRequested) => "--n-gpu-layers 0",
                Some(CpuReason::NoDevice) => "no usable GPU device",
            };
            return write!(f, "all {} layers on the CPU ({why})", self.total);
        }
        let devices = self
            .devices
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        write!(
            f,
            "offloaded {}/{} layers to {devices}",
            self.layers, self.total
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_always_compiled_in() {
        let backends = compiled_backends();
        assert_eq!(backends[0], "cpu");
        assert_eq!(backends.contains(&"vulkan"), cfg!(feature = "vulkan"));
    }
}
