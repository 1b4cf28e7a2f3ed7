package sessions

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The files a turn's tools make (an MCP server's screenshot, a rendered
// chart) are kept in Redis under their conversation's hash tag, so that
// every replica reads them: a turn paused for an approval and resumed on
// another replica still has them, and so has the outbox retrying their
// delivery. Each gets an id, att_1, att_2…, unique within its
// conversation for as long as its history lives, so that an id the model
// saw in an earlier turn never names another file.

// AttachmentTTL is how long a kept file lives. It outlives the outbox's
// longest try of a delivery (outbox.max_age, minutes) and a turn's wait
// for an approval, and is short enough that a conversation's files do not
// pile up in Redis.
const AttachmentTTL = 24 * time.Hour

// KeptFile is a file a tool made, as the conversation keeps it. Type is
// sniffed from Data by whoever kept it, never the tool's claim.
type KeptFile struct {
	ID     string // att_N
	Name   string // as the tool named it; made safe before it is sent
	Type   string // MIME type
	Source string // the tool that made it
	Size   int64
	Data   []byte // empty from AttachmentInfo
}

// ErrNoAttachment is an id the conversation keeps no file under (never
// made, expired, or not an attachment id at all).
var ErrNoAttachment = errors.New("sessions: no such attachment")

// keepAttachmentScript numbers and stores one file. KEYS: the sequence,
// then the prefix of the file keys. ARGV: name, type, source, size, data,
// file ttl (ms), sequence ttl (ms). It returns the number.
var keepAttachmentScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
local k = KEYS[2] .. n
redis.call('HSET', k, 'name', ARGV[1], 'type', ARGV[2], 'source', ARGV[3], 'size', ARGV[4], 'data', ARGV[5])
redis.call('PEXPIRE', k, ARGV[6])
return n
`)

// attachmentKey is the key prefix of conv's files; the number follows.
func (s *RedisStore) attachmentKey(conv string) string { return s.key(conv, "att:") }

// KeepAttachment stores f for conv under a new id, which it returns (and
// sets in f.ID). The sequence lives as long as the history, so an id is
// never given twice while a message could still name it.
func (s *RedisStore) KeepAttachment(ctx context.Context, conv string, f *KeptFile) (string, error) {
	seqTTL := max(s.opts.HistoryTTL, AttachmentTTL)
	n, err := keepAttachmentScript.Run(ctx, s.client, []string{s.key(conv, "attseq"), s.attachmentKey(conv)},
		f.Name, f.Type, f.Source, len(f.Data), f.Data, AttachmentTTL.Milliseconds(), seqTTL.Milliseconds()).Int64()
	if err != nil {
		return "", fmt.Errorf("sessions: keep attachment: %w", err)
	}
	f.ID, f.Size = "att_"+strconv.FormatInt(n, 10), int64(len(f.Data))
	return f.ID, nil
}

// attachmentNumber reads the N of an id att_N; ok is false for anything
// else, so that a model's or a user's text never becomes a key of its own.
func attachmentNumber(id string) (string, bool) {
	n, ok := strings.CutPrefix(id, "att_")
	if !ok || n == "" || len(n) > 18 {
		return "", false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return n, true
}

// Attachment reads file id of conv, with its bytes. ErrNoAttachment when
// there is none.
func (s *RedisStore) Attachment(ctx context.Context, conv, id string) (KeptFile, error) {
	return s.readAttachment(ctx, conv, id, "name", "type", "source", "size", "data")
}

// AttachmentInfo reads file id of conv without its bytes.
func (s *RedisStore) AttachmentInfo(ctx context.Context, conv, id string) (KeptFile, error) {
	return s.readAttachment(ctx, conv, id, "name", "type", "source", "size")
}

func (s *RedisStore) readAttachment(ctx context.Context, conv, id string, fields ...string) (KeptFile, error) {
	n, ok := attachmentNumber(id)
	if !ok {
		return KeptFile{}, ErrNoAttachment
	}
	v, err := s.client.HMGet(ctx, s.attachmentKey(conv)+n, fields...).Result()
	if err != nil {
		return KeptFile{}, fmt.Errorf("sessions: read attachment: %w", err)
	}
	if v[0] == nil {
		return KeptFile{}, ErrNoAttachment
	}
	str := func(i int) string { s, _ := v[i].(string); return s }
	f := KeptFile{ID: id, Name: str(0), Type: str(1), Source: str(2)}
	f.Size, _ = strconv.ParseInt(str(3), 10, 64)
	if len(fields) > 4 {
		f.Data = []byte(str(4))
	}
	return f, nil
}
