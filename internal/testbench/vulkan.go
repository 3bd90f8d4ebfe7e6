package testbench

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// lavapipeICD is where the Vulkan loader finds Mesa's software driver, lavapipe
// (mesa-vulkan-drivers).
const lavapipeICD = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"

// VulkanPrebuiltDir holds node-llama-cpp's x64 Vulkan prebuilt libraries.
func (e *Env) VulkanPrebuiltDir() string {
	return filepath.Join(e.Root, "npm", "node_modules", "@node-llama-cpp", "linux-x64-vulkan", "bins", "linux-x64-vulkan")
}

// Vulkan is a run of the node driver on node-llama-cpp's Vulkan prebuilt.
type Vulkan struct {
	Model        string
	Tokens, Runs int
	Layers       int  // layers offloaded, the output layer counted; -1 for all
	HideSoftware bool // leave GGML_VK_VISIBLE_DEVICES unset: ggml-vulkan then skips lavapipe
	Threads      int
	// PerfLogger turns ggml-vulkan's perf logger on (GGML_VK_PERF_LOGGER): after each
	// graph it prints the device's time for each op label to stderr, and a total.
	PerfLogger bool
	// LoggerGroups has it time groups of nodes the device may run at once instead
	// (GGML_VK_PERF_LOGGER_CONCURRENT).
	LoggerGroups bool
	// Gate, if set, is a file the driver waits for, its model loaded, before it generates.
	Gate string
	// Ungated runs it with no gate, as a job that starts and ends on its own would run.
	Ungated bool
	// GateBeforeLoad places the gate before the model's load, which makes the device.
	GateBeforeLoad bool
}

// RequireVulkan ends the test unless lavapipe and the Vulkan prebuilt are installed.
func (e *Env) RequireVulkan(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(lavapipeICD); err != nil {
		Missing(t, "Mesa's software Vulkan driver (mesa-vulkan-drivers): "+err.Error())
	}
	if _, err := os.Stat(filepath.Join(e.VulkanPrebuiltDir(), "libggml-vulkan.so")); err != nil {
		Missing(t, "node-llama-cpp's Vulkan prebuilt (make testenv): "+err.Error())
	}
}

// Command returns the command that runs v with node: through env, which execs node with
// the driver's settings, so that node is the process profiled. Shaders compiled by
// lavapipe are kept in the machine's cache (the first run compiles for some 35-50 s).
func (v Vulkan) Command(e *Env, node string) (string, []string) {
	args := []string{"GPU=vulkan", "MESA_SHADER_CACHE_DIR=" + e.ShaderCache()}
	if v.Layers >= 0 {
		args = append(args, "GPU_LAYERS="+strconv.Itoa(v.Layers))
	}
	if v.PerfLogger {
		args = append(args, "GGML_VK_PERF_LOGGER=1")
	}
	if v.LoggerGroups {
		args = append(args, "GGML_VK_PERF_LOGGER_CONCURRENT=1")
	}
	if v.Gate != "" {
		args = append(args, "WAIT_FILE="+v.Gate)
		if v.GateBeforeLoad {
			args = append(args, "WAIT_AT=load")
		}
	}
	if v.HideSoftware {
		args = append([]string{"-u", "GGML_VK_VISIBLE_DEVICES"}, args...)
	} else {
		args = append(args, "GGML_VK_VISIBLE_DEVICES=0")
	}
	args = append(append(args, node), e.NodeArgs(v.Model, v.Tokens, max(v.Threads, 1), v.Runs)...)
	return "env", args
}
