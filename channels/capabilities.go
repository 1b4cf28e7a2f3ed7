package channels

import "reflect"

// Capabilities is what one adapter can do beyond Channel, worked out once,
// when it is opened or registered, by CapabilitiesOf: each field is the
// adapter itself seen as that optional interface, or nil when it does not
// implement it. The gateway and the binary read these fields instead of
// asserting the adapter's type wherever they need to know, so that the
// list of what an adapter may implement is this one table (and
// channeltest checks each entry of it).
type Capabilities struct {
	// Channel is the adapter.
	Channel Channel

	Runner            Runner
	Typing            Typing
	HTTP              HTTPChannel
	Health            Health
	Poster            Poster
	KeyedPoster       KeyedPoster
	PosterFor         PosterFor
	Streamer          Streamer
	LiveAdopter       LiveAdopter
	Prompter          Prompter
	Awaited           Awaited
	Unanswered        Unanswered
	AttachmentFetcher AttachmentFetcher
	PostCounter       PostCounter
	RoomReader        RoomReader
	Editor            Editor
	Addresser         Addresser
	Uploader          Uploader
}

// Capability describes one optional interface of an adapter.
type Capability struct {
	// Name is the interface's name in this package (e.g. "Poster").
	Name string
	// Interface is the interface type.
	Interface reflect.Type
	// set fills c's field of this capability from ch.
	set func(c *Capabilities, ch Channel)
	// has reports whether c has it.
	has func(c *Capabilities) bool
}

// capability builds the table entry of interface I, whose field in
// Capabilities field returns.
func capability[I any](name string, field func(*Capabilities) *I) Capability {
	return Capability{
		Name:      name,
		Interface: reflect.TypeFor[I](),
		set: func(c *Capabilities, ch Channel) {
			if v, ok := ch.(I); ok {
				*field(c) = v
			}
		},
		has: func(c *Capabilities) bool { return any(*field(c)) != nil },
	}
}

// capabilityTable lists every optional interface of an adapter. A new one
// is added here, as a field of Capabilities and as a contract check in
// channeltest (whose test fails for an entry without one).
var capabilityTable = []Capability{
	capability("Runner", func(c *Capabilities) *Runner { return &c.Runner }),
	capability("Typing", func(c *Capabilities) *Typing { return &c.Typing }),
	capability("HTTPChannel", func(c *Capabilities) *HTTPChannel { return &c.HTTP }),
	capability("Health", func(c *Capabilities) *Health { return &c.Health }),
	capability("Poster", func(c *Capabilities) *Poster { return &c.Poster }),
	capability("KeyedPoster", func(c *Capabilities) *KeyedPoster { return &c.KeyedPoster }),
	capability("PosterFor", func(c *Capabilities) *PosterFor { return &c.PosterFor }),
	capability("Streamer", func(c *Capabilities) *Streamer { return &c.Streamer }),
	capability("LiveAdopter", func(c *Capabilities) *LiveAdopter { return &c.LiveAdopter }),
	capability("Prompter", func(c *Capabilities) *Prompter { return &c.Prompter }),
	capability("Awaited", func(c *Capabilities) *Awaited { return &c.Awaited }),
	capability("Unanswered", func(c *Capabilities) *Unanswered { return &c.Unanswered }),
	capability("AttachmentFetcher", func(c *Capabilities) *AttachmentFetcher { return &c.AttachmentFetcher }),
	capability("PostCounter", func(c *Capabilities) *PostCounter { return &c.PostCounter }),
	capability("RoomReader", func(c *Capabilities) *RoomReader { return &c.RoomReader }),
	capability("Editor", func(c *Capabilities) *Editor { return &c.Editor }),
	capability("Addresser", func(c *Capabilities) *Addresser { return &c.Addresser }),
	capability("Uploader", func(c *Capabilities) *Uploader { return &c.Uploader }),
}

// CapabilityTable returns the optional interfaces an adapter may
// implement, in a fixed order.
func CapabilityTable() []Capability {
	return append([]Capability(nil), capabilityTable...)
}

// CapabilitiesOf works out what ch implements. It is meant to be called
// once per adapter; nil gives the zero Capabilities.
func CapabilitiesOf(ch Channel) *Capabilities {
	c := &Capabilities{Channel: ch}
	if ch == nil {
		return c
	}
	for _, e := range capabilityTable {
		e.set(c, ch)
	}
	return c
}

// Has reports whether c includes the capability named name (a Name of
// CapabilityTable).
func (c *Capabilities) Has(name string) bool {
	for _, e := range capabilityTable {
		if e.Name == name {
			return e.has(c)
		}
	}
	return false
}

// Names lists the capabilities c includes, in the table's order.
func (c *Capabilities) Names() []string {
	var out []string
	for _, e := range capabilityTable {
		if e.has(c) {
			out = append(out, e.Name)
		}
	}
	return out
}

// PosterOf is c's Poster when it posts m's reply part by part, else nil:
// a PosterFor may refuse some of its messages (see PosterFor).
func (c *Capabilities) PosterOf(m Message) Poster {
	if c.Poster == nil || c.PosterFor != nil && !c.PosterFor.PostsFor(m) {
		return nil
	}
	return c.Poster
}
