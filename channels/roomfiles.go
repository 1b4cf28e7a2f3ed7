package channels

import (
	"fmt"
	"strings"
)

// DescribeAttachment is what a room shows of an attachment in place of its
// bytes: its kind, name, type and size ("image photo.png (image/png,
// 12 KB)"). The name is the sender's: cut, with its line breaks removed.
func DescribeAttachment(a Attachment) string {
	kind := a.Kind
	if kind == "" {
		kind = AttachmentFile
	}
	name := strings.Join(strings.Fields(a.Name), " ")
	if r := []rune(name); len(r) > 120 {
		name = string(r[:120]) + "…"
	}
	var about []string
	if a.MIME != "" && len(a.MIME) <= 100 {
		about = append(about, a.MIME)
	}
	if a.Size > 0 {
		about = append(about, sizeOf(a.Size))
	}
	out := kind
	if name != "" {
		out += " " + name
	}
	if len(about) > 0 {
		out += " (" + strings.Join(about, ", ") + ")"
	}
	return out
}

// sizeOf is n bytes in the unit a person reads.
func sizeOf(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
