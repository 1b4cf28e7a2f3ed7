package console

import (
	"log/slog"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/channeltest"
	"github.com/parleyhq/parley/metrics"
)

// TestContract: the console has no platform, credentials or connection;
// what it declares is what it implements.
func TestContract(t *testing.T) {
	channeltest.Run(t, channeltest.Subject{
		Name: Name,
		New: func(t *testing.T, _ *metrics.Metrics, _ *slog.Logger) channels.Channel {
			return New("contract", "tester", Options{FilesDir: t.TempDir()})
		},
		Capabilities: []channeltest.Capability{channeltest.Streamer, channeltest.Awaited, channeltest.AttachmentFetcher, channeltest.Uploader},
		Local:        true,
	})
}
