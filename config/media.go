package config

// Media bounds the images and files of a message that reach the model.
type Media struct {
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

// Defaults of the media: section.
const (
	DefaultMaxImages        = 4
	DefaultMaxImageBytes    = 4 << 20
	DefaultMaxImagePixels   = 25_000_000
	DefaultMaxDownloadBytes = 20 << 20
	DefaultMaxTextBytes     = 64 << 10
	DefaultResendRounds     = 2
)

// DefaultMedia is the media: section when the file says nothing.
func DefaultMedia() Media {
	return Media{
		MaxImages:        DefaultMaxImages,
		MaxImageBytes:    DefaultMaxImageBytes,
		MaxImagePixels:   DefaultMaxImagePixels,
		MaxDownloadBytes: DefaultMaxDownloadBytes,
		MaxTextBytes:     DefaultMaxTextBytes,
		ResendRounds:     DefaultResendRounds,
	}
}
