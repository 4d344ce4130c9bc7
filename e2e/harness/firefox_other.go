//go:build !linux

package harness

import "os/exec"

// dieWithParent: only Linux has a parent-death signal; elsewhere close()
// alone stops the browser.
func dieWithParent(*exec.Cmd) {}
