//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package argoresults

import (
	"os"
	"syscall"
)

// lockFile takes flock's exclusive lock on file, which belongs to the open file (not the
// process) and goes when it is closed.
func lockFile(file *os.File) error {
	for {
		err := syscall.Flock(int(file.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}
