package wechat

import (
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/parleyhq/parley/channels"
)

// splitChars cuts text into chunks of at most chars characters (not
// bytes): channels.Split counts bytes, and a Chinese character is three of
// them, so the byte limit is the character limit times the text's average
// bytes per character. A chunk of mixed text that comes out longer than
// chars characters (more narrow characters than average) is split again
// into even parts, so no tiny leftover message follows it.
func splitChars(text string, chars int) []string {
	if chars <= 0 {
		chars = 600
	}
	var out []string
	var split func(s string, limit, depth int)
	split = func(s string, limit, depth int) {
		for _, chunk := range channels.Split(s, limit) {
			n := utf8.RuneCountInString(chunk)
			if n <= chars || depth >= 6 {
				out = append(out, chunk)
				continue
			}
			parts := (n + chars - 1) / chars
			split(chunk, max((len(chunk)+parts-1)/parts, 4), depth+1)
		}
	}
	split(text, byteLimit(text, chars), 0)
	return out
}

func byteLimit(s string, chars int) int {
	runes := utf8.RuneCountInString(s)
	if runes == 0 {
		return chars
	}
	// Round the average up so a chunk of wide characters stays near chars.
	per := (len(s) + runes - 1) / runes
	return chars * max(per, 1)
}

var leadingMention = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*@\S+)+\s*`) })

// stripMention removes the @bot mention(s) a WeCom group message starts
// with, so that "@Parley /skill list" is the command "/skill list".
func stripMention(s string) string {
	return strings.TrimSpace(leadingMention().ReplaceAllString(s, ""))
}
