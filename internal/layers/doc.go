// Package layers holds the test that keeps the packages' imports to the
// layers docs/architecture.md draws: the table in its "layers" block is
// read, every package of the module is placed in a layer, and an import
// against the layers fails the test. The package has no code of its own.
package layers
