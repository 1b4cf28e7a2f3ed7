package media

import (
	"errors"
	"fmt"

	"github.com/parleyhq/parley/config"
)

// Section is the key of the file this package defines.
const SectionName = "media"

// Config is the media: section: it bounds the images and files of a
// message that reach the model.
type Config struct {
	// MaxImages is how many images of one message are read; 0 reads none.
	MaxImages int `yaml:"max_images"`
	// MaxImageBytes bounds one image as sent to the model; a larger one
	// (or one wider or taller than MaxImageSide) is scaled down.
	MaxImageBytes int64 `yaml:"max_image_bytes"`
	// MaxImagePixels bounds width×height, checked from the header before
	// anything is decoded (a tiny file can claim a huge picture).
	MaxImagePixels int64 `yaml:"max_image_pixels"`
	// MaxDownloadBytes bounds what is read of any attachment.
	MaxDownloadBytes int64 `yaml:"max_download_bytes"`
	// MaxTextBytes bounds the text of one file quoted to the model.
	MaxTextBytes int64 `yaml:"max_text_bytes"`
	// ResendRounds is how many later turns an image is sent again with
	// (fetched again from the platform); after that its description stays.
	ResendRounds int `yaml:"resend_rounds"`
}

// DefaultConfig is the media: section when the file says nothing, and
// what New falls back to for a limit left zero: the one place these
// defaults are set.
func DefaultConfig() *Config {
	return &Config{
		MaxImages:        4,
		MaxImageBytes:    4 << 20,
		MaxImagePixels:   25_000_000,
		MaxDownloadBytes: 20 << 20,
		MaxTextBytes:     64 << 10,
		ResendRounds:     2,
	}
}

func init() {
	config.RegisterSection(config.SectionSpec{Name: SectionName, NewConfig: func() config.SectionConfig { return DefaultConfig() }})
}

// FromConfig returns c's media: section, or the defaults when c has none
// (a Config built by hand).
func FromConfig(c config.Config) *Config {
	return config.SectionOr(c, SectionName, DefaultConfig)
}

// Env implements config.SectionConfig: no variable overrides the section.
func (c *Config) Env() []config.EnvVar { return nil }

// Validate implements config.SectionConfig.
func (c *Config) Validate() error {
	var errs []error
	for _, p := range []struct {
		key string
		v   int
	}{
		{"max_image_pixels", int(min(c.MaxImagePixels, 1<<30))},
		{"max_image_bytes", int(min(c.MaxImageBytes, 1<<40))},
		{"max_download_bytes", int(min(c.MaxDownloadBytes, 1<<40))},
		{"max_text_bytes", int(min(c.MaxTextBytes, 1<<40))},
	} {
		if p.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be greater than 0, got %d", p.key, p.v))
		}
	}
	if c.MaxImages < 0 {
		errs = append(errs, errors.New("max_images: must not be negative"))
	}
	if c.ResendRounds < 0 {
		errs = append(errs, errors.New("resend_rounds: must not be negative"))
	}
	return errors.Join(errs...)
}
