package sandbox

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"
)

// TEMPORARY measurement.
func TestZZPhaseCosts(t *testing.T) {
	if os.Getenv("ZZ_PHASES") == "" {
		t.Skip()
	}
	res := map[string][]time.Duration{}
	var order []string
	m := func(name string, f func()) {
		t0 := time.Now()
		f()
		if _, ok := res[name]; !ok {
			order = append(order, name)
		}
		res[name] = append(res[name], time.Since(t0))
	}
	mode := HostCgroupMode()
	for i := 0; i < 200; i++ {
		var sc *scratch
		var cs *cgroupSet
		m("scratch", func() { sc, _ = newScratch("", runName()) })
		m("sweep", func() { sweepStale(mode, "", nil) })
		m("cgroups", func() {
			var err error
			cs, err = newCgroupSet(mode, "sharedos-run-"+fmt.Sprint(os.Getpid())+"-zz", Limits{Pids: DefaultPids})
			if err != nil {
				t.Fatal(err)
			}
		})
		m("stats", func() { cs.stats() })
		m("killAndRemove", func() {
			if err := cs.killAndRemove(time.Second); err != nil {
				t.Fatal(err)
			}
		})
		m("scratch-rm", func() { sc.remove() })
	}
	for _, k := range order {
		v := res[k]
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		fmt.Printf("%-14s median %v p25 %v p75 %v\n", k, v[len(v)/2], v[len(v)/4], v[len(v)*3/4])
	}
}
