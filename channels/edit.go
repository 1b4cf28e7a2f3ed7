package channels

import "context"

// Editor is implemented by a Poster whose posts the bot can rewrite after
// the fact: the root post of an alert group's thread is edited to show
// the group resolved (and firing again), so that the chat's top level
// tells the state without opening the thread.
type Editor interface {
	// Edit replaces the text of the post id (an id Post returned for a
	// post into m's conversation) with part, one part as Parts cuts it,
	// so that it is rendered as posts are. Editing a post to the text it
	// already shows is harmless. A failure is a *PostError saying whether
	// another attempt may succeed (a rate limit, a 5xx) or not (the post
	// is gone, it is not the bot's); Edit does not retry by itself.
	Edit(ctx context.Context, m Message, id, part string) error
}
