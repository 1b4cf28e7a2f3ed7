package config_test

// The top-level sections the binary links in, registered as it does, so
// that the tests load, validate and print the whole file.
import (
	_ "github.com/parleyhq/parley/agent"         // model:, models:
	_ "github.com/parleyhq/parley/gateway"       // gateway:
	_ "github.com/parleyhq/parley/gateway/media" // media:
	_ "github.com/parleyhq/parley/sessions"      // sessions:
)
