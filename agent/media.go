package agent

import "github.com/parleyhq/parley/internal/jsonstring"

// Images in requests. The caller (the gateway) fetches and checks the
// bytes; the agent only places them: as image_url content parts of the
// user message they came with, and only in requests to a model marked
// vision. A fallback model without vision gets NoVisionNote in their place.

// NoVisionNote stands in for an image sent to a model without vision.
const NoVisionNote = "[image omitted: model has no vision]"

// turnMedia is what a turn's requests carry besides text: URLs (data
// URLs) for the turn's user message, and for stored user messages by
// their entry in the history.
type turnMedia struct {
	images  []string
	history map[int][]string
}

// appendParts writes a content array: the text (a JSON string token),
// then one image_url part per URL.
func appendParts(buf, text []byte, urls []string) []byte {
	buf = append(buf, `[{"type":"text","text":`...)
	buf = appendToken(buf, text)
	buf = append(buf, '}')
	for _, u := range urls {
		buf = append(buf, `,{"type":"image_url","image_url":{"url":`...)
		buf = jsonstring.Append(buf, u)
		buf = append(buf, `}}`...)
	}
	return append(buf, ']')
}
