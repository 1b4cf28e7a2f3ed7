// Package wsproto is the wire format of Feishu's long connection: the
// endpoint answer, the protobuf frame (pbbp2.Frame), its headers and the
// answer to an event, with the names github.com/larksuite/oapi-sdk-go/v3/ws
// gives them.
//
// It is written out here, not imported, because that package imports the
// SDK's root package for one constant, and the root package imports every
// one of the SDK's ~120 API packages (about 18 MB of generated Go, a quarter
// of a cold build's compile time): every cold build, test and fuzz run
// compiled them for a handful of types. The frame is a proto2 message with
// fields 1–9; Marshal writes them as the SDK's generated code does (a test
// holds bytes the SDK produced) and Unmarshal reads any valid encoding.
package wsproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// The endpoint request and the WebSocket URL's query parameters.
const (
	GenEndpointUri = "/callback/ws/endpoint"
	DeviceID       = "device_id"
	ServiceID      = "service_id"
)

// Frame headers, and the handshake's HTTP headers.
const (
	HeaderTimestamp            = "timestamp"
	HeaderType                 = "type"
	HeaderMessageID            = "message_id"
	HeaderSum                  = "sum"
	HeaderSeq                  = "seq"
	HeaderTraceID              = "trace_id"
	HeaderInstanceID           = "instance_id"
	HeaderBizRt                = "biz_rt"
	HeaderHandshakeStatus      = "Handshake-Status"
	HeaderHandshakeMsg         = "Handshake-Msg"
	HeaderHandshakeAuthErrCode = "Handshake-Autherrcode"
)

// MessageType is a frame's "type" header.
type MessageType string

const (
	MessageTypeEvent MessageType = "event"
	MessageTypeCard  MessageType = "card"
	MessageTypePing  MessageType = "ping"
	MessageTypePong  MessageType = "pong"
)

// FrameType is a frame's method.
type FrameType int

const (
	FrameTypeControl FrameType = 0
	FrameTypeData    FrameType = 1
)

// Codes of the endpoint answer and the handshake.
const (
	OK              = 0
	SystemBusy      = 1
	Forbidden       = 403
	AuthFailed      = 514
	ExceedConnLimit = 1000040350
	InternalError   = 1000040343
)

// EndpointResp answers POST GenEndpointUri.
type EndpointResp struct {
	Code int       `json:"code"`
	Msg  string    `json:"msg"`
	Data *Endpoint `json:"data"`
}

// Endpoint is where to connect, and how.
type Endpoint struct {
	Url          string        `json:"URL,omitempty"`
	ClientConfig *ClientConfig `json:"ClientConfig,omitempty"`
}

// ClientConfig is set by the server (in the endpoint answer and in pongs);
// intervals are in seconds.
type ClientConfig struct {
	ReconnectCount    int `json:"ReconnectCount,omitempty"`
	ReconnectInterval int `json:"ReconnectInterval,omitempty"`
	ReconnectNonce    int `json:"ReconnectNonce,omitempty"`
	PingInterval      int `json:"PingInterval,omitempty"`
}

// Header is one of a frame's headers.
type Header struct {
	Key   string
	Value string
}

// Headers are a frame's headers.
type Headers []Header

// GetString returns the first value of key, or "".
func (h Headers) GetString(key string) string {
	for _, header := range h {
		if header.Key == key {
			return header.Value
		}
	}
	return ""
}

// GetInt returns the first value of key that is a number, or 0.
func (h Headers) GetInt(key string) int {
	for _, header := range h {
		if header.Key == key {
			if val, err := strconv.Atoi(header.Value); err == nil {
				return val
			}
		}
	}
	return 0
}

// Add appends a header.
func (h *Headers) Add(key, value string) {
	*h = append(*h, Header{Key: key, Value: value})
}

// Response is the client's answer to an event, JSON in the frame's payload.
type Response struct {
	StatusCode int               `json:"code"`
	Headers    map[string]string `json:"headers"`
	Data       []byte            `json:"data"`
}

// NewResponseByCode is an answer with only a status.
func NewResponseByCode(code int) *Response {
	return &Response{StatusCode: code}
}

// NewPingFrame is the client's keep-alive.
func NewPingFrame(serviceID int32) *Frame {
	headers := Headers{}
	headers.Add(HeaderType, string(MessageTypePing))
	return &Frame{Method: int32(FrameTypeControl), Service: serviceID, Headers: headers}
}

// Frame is pbbp2.Frame.
type Frame struct {
	SeqID           uint64 // 1, required
	LogID           uint64 // 2, required
	Service         int32  // 3, required
	Method          int32  // 4, required
	Headers         []Header
	PayloadEncoding string
	PayloadType     string
	Payload         []byte // written only when not nil
	LogIDNew        string
}

// Protobuf wire types.
const (
	wireVarint = 0
	wire64     = 1
	wireBytes  = 2
	wire32     = 5
)

func appendTag(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire))
}

func appendBytes(b []byte, field int, v []byte) []byte {
	b = appendTag(b, field, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendVarint(b []byte, field int, v uint64) []byte {
	return binary.AppendUvarint(appendTag(b, field, wireVarint), v)
}

// Marshal encodes the frame. Required and non-pointer optional fields are
// always written, Payload only when set: what the SDK's generated code does.
func (f *Frame) Marshal() ([]byte, error) {
	var b []byte
	b = appendVarint(b, 1, f.SeqID)
	b = appendVarint(b, 2, f.LogID)
	// int32 is sign-extended to 64 bits on the wire (a negative value takes
	// ten bytes), as proto2 requires.
	b = appendVarint(b, 3, uint64(int64(f.Service)))
	b = appendVarint(b, 4, uint64(int64(f.Method)))
	for _, h := range f.Headers {
		var hb []byte
		hb = appendBytes(hb, 1, []byte(h.Key))
		hb = appendBytes(hb, 2, []byte(h.Value))
		b = appendBytes(b, 5, hb)
	}
	b = appendBytes(b, 6, []byte(f.PayloadEncoding))
	b = appendBytes(b, 7, []byte(f.PayloadType))
	if f.Payload != nil {
		b = appendBytes(b, 8, f.Payload)
	}
	b = appendBytes(b, 9, []byte(f.LogIDNew))
	return b, nil
}

var errTruncated = errors.New("wsproto: truncated frame")

// field reads one field: its number, wire type, varint value or bytes, and
// the rest of data.
func field(data []byte) (num int, wire int, v uint64, bs []byte, rest []byte, err error) {
	tag, n := binary.Uvarint(data)
	if n <= 0 {
		return 0, 0, 0, nil, nil, errTruncated
	}
	data = data[n:]
	if tag>>3 == 0 || tag>>3 > 1<<29-1 {
		return 0, 0, 0, nil, nil, fmt.Errorf("wsproto: bad field number %d", tag>>3)
	}
	num, wire = int(tag>>3), int(tag&7)
	switch wire {
	case wireVarint:
		v, n = binary.Uvarint(data)
		if n <= 0 {
			return 0, 0, 0, nil, nil, errTruncated
		}
		return num, wire, v, nil, data[n:], nil
	case wire64:
		if len(data) < 8 {
			return 0, 0, 0, nil, nil, errTruncated
		}
		return num, wire, binary.LittleEndian.Uint64(data), nil, data[8:], nil
	case wire32:
		if len(data) < 4 {
			return 0, 0, 0, nil, nil, errTruncated
		}
		return num, wire, uint64(binary.LittleEndian.Uint32(data)), nil, data[4:], nil
	case wireBytes:
		l, n := binary.Uvarint(data)
		if n <= 0 || l > uint64(len(data)-n) {
			return 0, 0, 0, nil, nil, errTruncated
		}
		data = data[n:]
		return num, wire, 0, data[:l], data[l:], nil
	}
	return 0, 0, 0, nil, nil, fmt.Errorf("wsproto: unsupported wire type %d", wire)
}

// Unmarshal decodes a frame, skipping unknown fields; a required field
// missing is an error, as in the SDK.
func (f *Frame) Unmarshal(data []byte) error {
	*f = Frame{}
	var seen uint8
	for len(data) > 0 {
		num, wire, v, bs, rest, err := field(data)
		if err != nil {
			return err
		}
		data = rest
		want := wireBytes
		if num <= 4 {
			want = wireVarint
		}
		if num <= 9 && wire != want {
			return fmt.Errorf("wsproto: field %d has wire type %d", num, wire)
		}
		switch num {
		case 1:
			f.SeqID, seen = v, seen|1
		case 2:
			f.LogID, seen = v, seen|2
		case 3:
			f.Service, seen = int32(v), seen|4
		case 4:
			f.Method, seen = int32(v), seen|8
		case 5:
			h, err := unmarshalHeader(bs)
			if err != nil {
				return err
			}
			f.Headers = append(f.Headers, h)
		case 6:
			f.PayloadEncoding = string(bs)
		case 7:
			f.PayloadType = string(bs)
		case 8:
			f.Payload = append([]byte{}, bs...)
		case 9:
			f.LogIDNew = string(bs)
		}
	}
	if seen != 15 {
		return errors.New("wsproto: frame lacks a required field (SeqID, LogID, service or method)")
	}
	return nil
}

func unmarshalHeader(data []byte) (Header, error) {
	var h Header
	var seen uint8
	for len(data) > 0 {
		num, wire, _, bs, rest, err := field(data)
		if err != nil {
			return Header{}, err
		}
		data = rest
		if num <= 2 && wire != wireBytes {
			return Header{}, fmt.Errorf("wsproto: header field %d has wire type %d", num, wire)
		}
		switch num {
		case 1:
			h.Key, seen = string(bs), seen|1
		case 2:
			h.Value, seen = string(bs), seen|2
		}
	}
	if seen != 3 {
		return Header{}, errors.New("wsproto: header lacks its key or value")
	}
	return h, nil
}
