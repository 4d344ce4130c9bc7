package harness

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the browser if the test binary dies
// (a panic or go test's timeout), so no Firefox outlives its test.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
