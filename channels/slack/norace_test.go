//go:build !race

package slack

// raceEnabled: see race_test.go.
const raceEnabled = false
