package channeltest

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/parleyhq/parley/channels"
)

// contract is the check Run makes of an adapter that declares one
// capability, beyond declaring exactly what it implements.
type contract struct {
	what string // the subtest's name, after the capability's
	run  func(t *testing.T, s Subject)
}

// contracts holds one check for every entry of channels.CapabilityTable;
// TestEveryCapabilityHasAContract fails for an entry without one, so that
// no capability is added without its check.
var contracts = map[Capability]contract{
	Runner:            {"Run returns nil and leaves no goroutine after cancel", checkRunStops},
	Health:            {"Ready shows no credential", checkHealth},
	Typing:            {"StartTyping returns a stop that can be called twice", checkTyping},
	HTTPChannel:       {"Mount registers on a fresh mux", checkMount},
	Poster:            {"Parts cuts a reply into non-empty posts at a sane pace", checkPoster},
	KeyedPoster:       {"a post asked for again with its key is found, not made twice", checkKeyedPoster},
	PosterFor:         {"a PosterFor is a Poster", checkPosterFor},
	Streamer:          {"StartReply's sink can be discarded", checkStreamer},
	Prompter:          {"SendPrompt posts an approval prompt", checkPrompter},
	Awaited:           {"AwaitsEveryReply is only declared by a local adapter", checkAwaited},
	Unanswered:        {"LeftUnanswered of a message nobody waits for posts nothing", checkUnanswered},
	AttachmentFetcher: {"FetchAttachment refuses an attachment that names nothing", checkFetcher},
	PostCounter:       {"Posts counts a short reply as one post", checkPostCounter},
}

func contextFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

func checkHealth(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	if err := channels.CapabilitiesOf(ch).Health.Ready(); err != nil {
		noSecret(t, s, "Ready()", err.Error())
	}
}

func checkTyping(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	stop := channels.CapabilitiesOf(ch).Typing.StartTyping(contextFor(t), s.Message)
	if stop == nil {
		t.Fatal("StartTyping returned a nil stop")
	}
	stop()
	stop()
}

func checkMount(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	mux := http.NewServeMux()
	channels.CapabilitiesOf(ch).HTTP.Mount(mux)
}

func checkPoster(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	p := channels.CapabilitiesOf(ch).Poster
	parts := p.Parts(s.Message, channels.Reply{Text: "contract: one short reply"})
	if len(parts) == 0 {
		t.Fatal("Parts of a short reply is empty")
	}
	for i, part := range parts {
		if part == "" {
			t.Errorf("part %d of %d is empty", i, len(parts))
		}
	}
	if pace := p.Pace(); pace.Every < 0 || pace.Burst < 0 {
		t.Errorf("Pace() = %+v; want no negative figure", pace)
	}
}

func checkPosterFor(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	c := channels.CapabilitiesOf(ch)
	if c.Poster == nil {
		t.Fatalf("%T implements channels.PosterFor but not channels.Poster", ch)
	}
	c.PosterFor.PostsFor(s.Message)
}

func checkStreamer(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	ctx := contextFor(t)
	sink, err := channels.CapabilitiesOf(ch).Streamer.StartReply(ctx, s.Message)
	if err != nil {
		noSecret(t, s, "StartReply's error", err.Error())
		return
	}
	if sink == nil {
		return // this reply is not streamed: allowed
	}
	if err := sink.Discard(ctx); err != nil {
		noSecret(t, s, "Discard's error", err.Error())
		t.Errorf("Discard of a sink that showed nothing = %v", err)
	}
}

func checkPrompter(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	_, err := channels.CapabilitiesOf(ch).Prompter.SendPrompt(contextFor(t), s.Message, channels.Reply{
		Notice: true, Text: "contract: approve `/approve ABC`",
		Approval: &channels.Approval{ID: "contract-id", Code: "ABC", Tool: "contract_tool", Args: "{}"},
	})
	if err != nil {
		noSecret(t, s, "SendPrompt's error", err.Error())
		t.Errorf("SendPrompt = %v; want the prompt posted", err)
	}
}

func checkAwaited(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	if !s.Local {
		// The gateway answers every message of such an adapter, refusals
		// included: only a sender at a local prompt waits like that.
		t.Errorf("%T awaits every reply but has a platform behind it (Subject.Local is false)", ch)
	}
	channels.CapabilitiesOf(ch).Awaited.AwaitsEveryReply()
}

func checkFetcher(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	rc, err := channels.CapabilitiesOf(ch).AttachmentFetcher.FetchAttachment(contextFor(t), s.Message, channels.Attachment{}, 1<<10)
	if err == nil {
		rc.Close()
		t.Fatal("FetchAttachment of an attachment that names nothing succeeded")
	}
	noSecret(t, s, "FetchAttachment's error", err.Error())
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("FetchAttachment waited for the test's deadline: %v", err)
	}
}

func checkKeyedPoster(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	p := channels.CapabilitiesOf(ch).KeyedPoster
	ctx := contextFor(t)
	first, err := p.PostKeyed(ctx, s.Message, "contract: one keyed post", "contract-key.0", false)
	if err != nil {
		t.Fatalf("PostKeyed: %v", err)
	}
	again, err := p.PostKeyed(ctx, s.Message, "contract: one keyed post", "contract-key.0", true)
	if err != nil {
		t.Fatalf("PostKeyed again: %v", err)
	}
	if first == "" || again != first {
		t.Errorf("PostKeyed again gave id %q; want the first post's %q", again, first)
	}
}

func checkUnanswered(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	before := 0
	if s.SendAttempts != nil {
		before = s.SendAttempts()
	}
	// No request waits for s.Message: there is nothing to end, and
	// nothing reaches the platform.
	channels.CapabilitiesOf(ch).Unanswered.LeftUnanswered(contextFor(t), s.Message)
	if s.SendAttempts != nil && s.SendAttempts() != before {
		t.Errorf("LeftUnanswered sent %d messages; want none", s.SendAttempts()-before)
	}
}

func checkPostCounter(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	if n := channels.CapabilitiesOf(ch).PostCounter.Posts(s.Message, "contract: one short reply"); n != 1 {
		t.Errorf("Posts of a short reply = %d; want 1", n)
	}
}
