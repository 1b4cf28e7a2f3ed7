package wxcrypto

import (
	"testing"
	"time"
)

// BenchmarkOpenMessage is the work of every callback before anything reads
// it: the timestamp, the signature, AES-256-CBC and the XML of a typical
// text message.
func BenchmarkOpenMessage(b *testing.B) {
	c := vectorCrypter(b)
	q := Query{MsgSignature: vectorPostSignature, Timestamp: vectorPostTimestamp, Nonce: vectorPostNonce}
	now := unix(vectorPostTimestamp)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.OpenMessage(q, vectorPostBody, now, DefaultWindow); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSealReply is an encrypted passive reply of a short answer.
func BenchmarkSealReply(b *testing.B) {
	c := vectorCrypter(b)
	reply := TextReply("mycreate", vectorReceiveID, time.Unix(1409659813, 0), "这是一个简短的回答。This is a short answer.")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.SealReply(reply, time.Unix(1409659813, 0), "1372623149"); err != nil {
			b.Fatal(err)
		}
	}
}
