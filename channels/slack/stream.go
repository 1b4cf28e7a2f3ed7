package slack

// How a live reply is shown in a workspace, from the richest to the
// plainest. A workspace starts at modeStream and moves down when Slack
// refuses the mode for good (the method is unknown to it, not allowed, or
// lacks a scope); the move is remembered in this process for the
// workspace, so that later replies do not ask again.
type replyMode int

const (
	modeStream replyMode = iota // chat.startStream / appendStream / stopStream
	modeUpdate                  // one chat.postMessage, then chat.update at most once a second
	modePost                    // no live reply: the answer is posted when complete
)

func (m replyMode) String() string {
	switch m {
	case modeStream:
		return "stream"
	case modeUpdate:
		return "update"
	}
	return "post"
}

// fallbacks are the moves a live reply can make, primed at zero so that
// the first shows as an increase.
var fallbacks = [][2]replyMode{{modeStream, modeUpdate}, {modeStream, modePost}, {modeUpdate, modePost}}

// primeFallbacks creates the parley_reply_stream_fallbacks_total series
// of Slack at zero.
func (a *Adapter) primeFallbacks() {
	for _, f := range fallbacks {
		a.m.ReplyStreamFallbacks.WithLabelValues(Name, f[0].String(), f[1].String())
	}
}
