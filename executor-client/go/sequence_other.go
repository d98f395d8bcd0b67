//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package argoresults

import (
	"errors"
	"os"
)

// lockFile: this platform has no flock, so the counter file cannot be shared safely.
func lockFile(*os.File) error {
	return errors.ErrUnsupported
}
