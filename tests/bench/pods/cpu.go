package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A side's processes, measured from /proc: given PIDs (kube-apiserver and etcd, or
// argo-results-server) and, when postgres is set, every process of the machine's Postgres
// (its backends, WAL writer, checkpointer and the rest; nothing else uses it meanwhile), as
// the status quo's side counts the whole of etcd.
type processes struct {
	pids     []int
	postgres bool
}

func parsePIDs(list string) ([]int, error) {
	var pids []int
	for _, field := range strings.Split(list, ",") {
		if field == "" {
			continue
		}
		pid, err := strconv.Atoi(field)
		if err != nil {
			return nil, fmt.Errorf("a PID: %q", field)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// members are the processes now: the given PIDs and Postgres'.
func (p processes) members() []int {
	pids := append([]int(nil), p.pids...)
	if !p.postgres {
		return pids
	}
	entries, _ := os.ReadDir("/proc")
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		if command, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "comm")); err == nil &&
			strings.TrimSpace(string(command)) == "postgres" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cpuTicks is each member's user plus system time, in clock ticks.
func (p processes) cpuTicks() map[int]int64 {
	ticks := map[int]int64{}
	for _, pid := range p.members() {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// After the command's name in parentheses, which may hold spaces: fields 3 on,
		// utime and stime being the 14th and 15th.
		rest := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(rest) < 13 {
			continue
		}
		user, _ := strconv.ParseInt(rest[11], 10, 64)
		system, _ := strconv.ParseInt(rest[12], 10, 64)
		ticks[pid] = user + system
	}
	return ticks
}

// ticksSince is the CPU the members spent since before: a process that started since
// counts whole, one that ended since is lost (the server's pool keeps its connections).
func (p processes) ticksSince(before map[int]int64) int64 {
	var spent int64
	for pid, now := range p.cpuTicks() {
		spent += now - before[pid]
	}
	return spent
}

// pssKiB is the members' proportional set size: the resident memory of each, with pages
// it shares (Postgres' shared buffers) divided among those sharing them, so that the sum
// counts each page once.
func (p processes) pssKiB() int64 {
	var total int64
	for _, pid := range p.members() {
		file, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
		if err != nil {
			continue
		}
		lines := bufio.NewScanner(file)
		for lines.Scan() {
			fields := strings.Fields(lines.Text())
			if len(fields) >= 2 && fields[0] == "Pss:" {
				kib, _ := strconv.ParseInt(fields[1], 10, 64)
				total += kib
			}
		}
		file.Close()
	}
	return total
}
