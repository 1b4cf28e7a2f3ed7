//go:build !race

package agent

// raceEnabled: see race_test.go.
const raceEnabled = false
