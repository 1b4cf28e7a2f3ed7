//go:build race

package parleybin

// Race reports whether this test process was built with -race.
const Race = true
