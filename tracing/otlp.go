package tracing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// exporter sends spans to an OTLP/HTTP receiver as protobuf. It is
// Parley's own rather than otlptracehttp because that exporter links the
// gRPC service stubs of the OTLP collector package, which stop the linker
// from dropping unused methods: the binary grew by 25 MB and an idle
// replica by 12 MiB of RSS, for code that never runs.
type exporter struct {
	url     string
	headers http.Header
	client  *http.Client
}

// Defaults of the OTLP environment variables.
const (
	defaultEndpoint = "http://localhost:4318"
	defaultTimeout  = 10 * time.Second
	tracesPath      = "/v1/traces"
)

// newExporter reads OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, …_HEADERS and
// …_TIMEOUT, the traces-specific variable winning, as the OTLP exporters
// do.
func newExporter(getenv func(string) string) (*exporter, error) {
	// Each name is spelled out, so that the configuration reference can
	// be checked against the source.
	either := func(traces, general string) string {
		if v := strings.TrimSpace(getenv(traces)); v != "" {
			return v
		}
		return strings.TrimSpace(getenv(general))
	}
	// The traces endpoint is used as given; the general one gets the
	// signal's path appended.
	target := getenv(envTracesEndpoint)
	if target == "" {
		base := strings.TrimSpace(getenv(envEndpoint))
		if base == "" {
			base = defaultEndpoint
		}
		target = strings.TrimRight(base, "/") + tracesPath
	}
	u, err := url.Parse(strings.TrimSpace(target))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("tracing: the OTLP endpoint must be an http:// or https:// URL") // it may hold credentials: not echoed
	}
	e := &exporter{url: u.String(), headers: http.Header{}, client: &http.Client{Timeout: defaultTimeout}}
	e.headers.Set("Content-Type", "application/x-protobuf")
	if v := either("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"); v != "" {
		for pair := range strings.SplitSeq(v, ",") {
			k, val, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return nil, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_HEADERS: an entry is not key=value")
			}
			if dec, err := url.QueryUnescape(strings.TrimSpace(val)); err == nil {
				val = dec
			}
			e.headers.Set(k, strings.TrimSpace(val))
		}
	}
	if v := either("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_TIMEOUT=%q is not a positive number of milliseconds", v)
		}
		e.client.Timeout = time.Duration(ms) * time.Millisecond
	}
	return e, nil
}

// ExportSpans implements sdktrace.SpanExporter.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body, err := encodeSpans(spans)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("tracing: export: %w", err)
	}
	req.Header = e.headers.Clone()
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("tracing: export: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("tracing: export: the receiver answered %s", resp.Status)
	}
	return nil
}

// Shutdown implements sdktrace.SpanExporter.
func (e *exporter) Shutdown(context.Context) error {
	e.client.CloseIdleConnections()
	return nil
}

// encodeSpans encodes an ExportTraceServiceRequest: field 1 repeated
// ResourceSpans, one per resource and instrumentation scope.
func encodeSpans(spans []sdktrace.ReadOnlySpan) ([]byte, error) {
	type key struct {
		res   attribute.Distinct
		scope string
	}
	groups := map[key]*tracepb.ResourceSpans{}
	var order []*tracepb.ResourceSpans
	for _, s := range spans {
		k := key{s.Resource().Equivalent(), s.InstrumentationScope().Name}
		rs := groups[k]
		if rs == nil {
			rs = &tracepb.ResourceSpans{
				Resource:   &resourcepb.Resource{Attributes: keyValues(s.Resource().Attributes())},
				ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: s.InstrumentationScope().Name, Version: s.InstrumentationScope().Version}}},
				SchemaUrl:  s.Resource().SchemaURL(),
			}
			groups[k] = rs
			order = append(order, rs)
		}
		rs.ScopeSpans[0].Spans = append(rs.ScopeSpans[0].Spans, span(s))
	}
	var body []byte
	for _, rs := range order {
		b, err := proto.Marshal(rs)
		if err != nil {
			return nil, fmt.Errorf("tracing: encode spans: %w", err)
		}
		body = protowire.AppendTag(body, 1, protowire.BytesType)
		body = protowire.AppendBytes(body, b)
	}
	return body, nil
}

func span(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	out := &tracepb.Span{
		TraceId:           tid[:],
		SpanId:            sid[:],
		TraceState:        sc.TraceState().String(),
		Name:              s.Name(),
		Kind:              tracepb.Span_SpanKind(spanKind(s.SpanKind())),
		StartTimeUnixNano: uint64(s.StartTime().UnixNano()),
		EndTimeUnixNano:   uint64(s.EndTime().UnixNano()),
		Attributes:        keyValues(s.Attributes()),
		Flags:             uint32(sc.TraceFlags()),
	}
	if p := s.Parent(); p.IsValid() {
		psid := p.SpanID()
		out.ParentSpanId = psid[:]
	}
	for _, ev := range s.Events() {
		out.Events = append(out.Events, &tracepb.Span_Event{TimeUnixNano: uint64(ev.Time.UnixNano()), Name: ev.Name, Attributes: keyValues(ev.Attributes)})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		out.Links = append(out.Links, &tracepb.Span_Link{TraceId: ltid[:], SpanId: lsid[:], Attributes: keyValues(l.Attributes)})
	}
	switch st := s.Status(); st.Code {
	case codes.Error:
		out.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: st.Description}
	case codes.Ok:
		out.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	}
	return out
}

// spanKind maps a span kind to its OTLP number.
func spanKind(k trace.SpanKind) int32 {
	switch k {
	case trace.SpanKindInternal:
		return 1
	case trace.SpanKindServer:
		return 2
	case trace.SpanKindClient:
		return 3
	case trace.SpanKindProducer:
		return 4
	case trace.SpanKindConsumer:
		return 5
	}
	return 0
}

func keyValues(attrs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, &commonpb.KeyValue{Key: string(a.Key), Value: anyValue(a.Value)})
	}
	return out
}

func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRINGSLICE:
		var vals []*commonpb.AnyValue
		for _, s := range v.AsStringSlice() {
			vals = append(vals, &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}})
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.Emit()}}
}
