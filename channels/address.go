package channels

// Addresser is implemented by an adapter that needs more of a message the
// bot starts itself (a trigger's work, not an event) than its chat and
// thread to post there: Slack the thread's ts and the mark by which it
// follows a thread the bot posted in, Feishu the root message to reply to
// in its thread. Address fills those in on m, whose Channel, Workspace,
// Chat and (optionally) Thread are set; it never changes them, and a
// message with no Thread is a post to the chat.
type Addresser interface {
	Address(m *Message)
}
