package channels

import (
	"context"
	"strings"
)

// File is one file the bot sends into a chat. The gateway has already
// checked it before an adapter sees it: Type is sniffed from Data (never
// taken from the tool that made it), Name is a plain base name whose
// extension fits Type, and Data is within the adapter's FileLimits for
// its kind (an image over the limit has been scaled down, any other file
// over it refused). An adapter sends it as it is.
type File struct {
	Name    string // base name: no path separators, no control characters
	Type    string // MIME type, e.g. "image/png", "text/csv"
	Data    []byte
	Caption string // text shown with the file; may be empty
}

// Image reports whether f is sent as an image (the platforms show images
// inline and take them by a route, and within a limit, of their own).
func (f File) Image() bool { return strings.HasPrefix(f.Type, "image/") }

// FileLimits is what a platform takes into one chat, in bytes. A zero
// limit means that kind of file cannot be sent there at all: the gateway
// then sends the caption and a note in text instead.
type FileLimits struct {
	MaxImage int64
	MaxFile  int64
}

// Uploader is implemented by adapters that can send a file into a
// conversation natively (an image message, a file message), in the
// thread its message came from.
type Uploader interface {
	// FileLimits is what the chat of m takes; it may differ by transport
	// (a WeChat personal account takes no files where a WeCom app does).
	FileLimits(m Message) FileLimits
	// Upload makes one attempt at sending f, with its caption, into the
	// conversation m came from (its thread), and returns the platform's
	// id of the message it made ("" when the platform gives none). key is
	// the file's delivery id, the same on every try on every replica;
	// again says an earlier try with key may have reached the platform
	// (it timed out, or failed after the platform took the bytes): where
	// the platform can find a message again by key (an idempotency key, a
	// marker), Upload looks first and returns the id it finds instead of
	// sending a copy. Steps that leave nothing visible (an upload whose
	// message was never posted) may be repeated. A failure is a
	// *PostError saying whether another attempt may succeed; Upload does
	// not retry by itself.
	Upload(ctx context.Context, m Message, f File, key string, again bool) (id string, err error)
}
