// Package scripts holds the shell scripts that build and test Parley —
// test runs the suite against a real Redis, fuzz runs every fuzz target
// for a few thousand inputs — and the tests that keep them runnable. The
// CI entry point is .ci/run at the repository's root.
package scripts
