package main

// `kubelet container`: the process that becomes one container. It is started by the
// stand-in in a mount namespace and a PID namespace of its own (CLONE_NEWNS,
// CLONE_NEWPID), makes every mount private to it, bind-mounts the pod's volumes at their
// mount paths, mounts a /proc of its PID namespace, and execs the container's command,
// which is PID 1 there as in a container. Two pods that both mount /var/run/argo
// therefore see two different directories, as they would in two containers; the rest of
// the host's file system is shared, which is where this differs from a container runtime
// (no image, no chroot).
//
// The PID namespace is not only faithful, it is what keeps the host alive: argoexec's
// emissary forwards a SIGTERM with osspecific.Kill on its child's Pid after
// os.Process.Release has set it to -1, which is kill(-1, SIGTERM): every process the
// caller may signal. In a container that is the container's own processes; on a host,
// as root, it is every process of the machine.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// mountSpec is one bind mount, "SOURCE:TARGET" or "SOURCE:TARGET:ro" on the command line.
type mountSpec struct {
	source, target string
	readOnly       bool
}

func (m mountSpec) String() string {
	s := m.source + ":" + m.target
	if m.readOnly {
		s += ":ro"
	}
	return s
}

func parseMount(s string) (mountSpec, error) {
	parts := strings.Split(s, ":")
	switch {
	case len(parts) == 2:
		return mountSpec{source: parts[0], target: parts[1]}, nil
	case len(parts) == 3 && parts[2] == "ro":
		return mountSpec{source: parts[0], target: parts[1], readOnly: true}, nil
	}
	return mountSpec{}, fmt.Errorf("mount %q: want SOURCE:TARGET[:ro]", s)
}

// runContainer is `kubelet container [--mount S:T[:ro]]... [--workdir D] -- COMMAND...`.
func runContainer(args []string) error {
	var mounts []mountSpec
	workdir := ""
	for len(args) > 0 && args[0] != "--" {
		if len(args) < 2 {
			return fmt.Errorf("%s needs a value", args[0])
		}
		switch args[0] {
		case "--mount":
			m, err := parseMount(args[1])
			if err != nil {
				return err
			}
			mounts = append(mounts, m)
		case "--workdir":
			workdir = args[1]
		default:
			return fmt.Errorf("unknown flag %s", args[0])
		}
		args = args[2:]
	}
	if len(args) < 2 {
		return errors.New("no command after --")
	}
	command := args[1:]
	// Mounts made from here on stay in this namespace.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	// Every source is opened before the first mount: a mount at /tmp would hide a source
	// under /tmp from the mounts after it. Each is then mounted from its descriptor.
	sources := make([]*os.File, len(mounts))
	for i, m := range mounts {
		f, err := os.OpenFile(m.source, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		sources[i] = f
	}
	for i, m := range mounts {
		if err := bind(m, sources[i]); err != nil {
			return err
		}
		sources[i].Close()
	}
	// After the binds, which read their sources through the host's /proc/self/fd.
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	if workdir != "" {
		if err := os.Chdir(workdir); err != nil {
			return err
		}
	}
	path, err := exec.LookPath(command[0])
	if err != nil {
		return err
	}
	return syscall.Exec(path, command, os.Environ())
}

// bind mounts m.source, open as source, at m.target, making the target (a directory, or
// a file for a file) if the host has none there.
func bind(m mountSpec, source *os.File) error {
	info, err := source.Stat()
	if err != nil {
		return err
	}
	if info.IsDir() {
		err = os.MkdirAll(m.target, 0o755)
	} else if _, statErr := os.Stat(m.target); errors.Is(statErr, os.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(m.target), 0o755); err == nil {
			err = os.WriteFile(m.target, nil, 0o644)
		}
	}
	if err != nil {
		return fmt.Errorf("making mount point %s: %w", m.target, err)
	}
	from := fmt.Sprintf("/proc/self/fd/%d", source.Fd())
	if err := syscall.Mount(from, m.target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", m, err)
	}
	if m.readOnly {
		flags := uintptr(syscall.MS_BIND | syscall.MS_REMOUNT | syscall.MS_RDONLY | syscall.MS_REC)
		if err := syscall.Mount("", m.target, "", flags, ""); err != nil {
			return fmt.Errorf("read-only %s: %w", m, err)
		}
	}
	return nil
}
