//go:build race

package agent

// raceEnabled: the race detector is on. It instruments allocations, so
// testing.AllocsPerRun counts differently and the allocation ceilings
// (allocs_test.go) are not checked; the paths still run.
const raceEnabled = true
