package sandbox

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
)

// stats reads the counters the run cares about straight from the cgroup files: the
// library's Stat misses pids.peak and the v1 oom_kill count.
func (cs *cgroupSet) stats() Stats {
	var st Stats
	if cs == nil {
		return st
	}
	if cs.v1 != nil {
		mem, pids, acct := cs.v1Path[cgroup1.Memory], cs.v1Path[cgroup1.Pids], cs.v1Path[cgroup1.Cpuacct]
		st.PeakMemory = readInt(filepath.Join(mem, "memory.max_usage_in_bytes"))
		st.OOMKills = readKey(filepath.Join(mem, "memory.oom_control"), "oom_kill")
		st.PeakTasks = readInt(filepath.Join(pids, "pids.peak"))
		st.PidsLimitHits = readKey(filepath.Join(pids, "pids.events"), "max")
		st.CPUTime = time.Duration(readInt(filepath.Join(acct, "cpuacct.usage")))
		return st
	}
	if cs.v2Path != "" {
		st.PeakMemory = readInt(filepath.Join(cs.v2Path, "memory.peak"))
		st.OOMKills = readKey(filepath.Join(cs.v2Path, "memory.events"), "oom_kill")
		st.PeakTasks = readInt(filepath.Join(cs.v2Path, "pids.peak"))
		st.PidsLimitHits = readKey(filepath.Join(cs.v2Path, "pids.events"), "max")
		st.CPUTime = time.Duration(readKey(filepath.Join(cs.v2Path, "cpu.stat"), "usage_usec")) * time.Microsecond
	}
	return st
}

func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// readKey reads "key value" lines (memory.events, cpu.stat, oom_control…).
func readKey(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
