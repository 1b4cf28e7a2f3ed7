// Package metrics names every Prometheus metric Parley exports. Collectors are
// created on a registry the caller owns, so tests and the binary never share
// global state, and every label is a bounded value: a channel, a skill, a tool,
// an outcome or a reason — never a user, chat or message id.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Label values used across packages. Keeping them here stops the same outcome
// from being spelled two ways in two packages.
const (
	OutcomeOK     = "ok"
	OutcomeError  = "error"
	OutcomeDenied = "denied"
	OutcomeRetry  = "retry"
	// OutcomeTimeout is a tool call that gave up on the tool's own
	// deadline while the turn was still running.
	OutcomeTimeout = "timeout"
	// OutcomeUnavailable is a call to a tool that exists but cannot run
	// now (its MCP server is down): it was not offered, and is not run.
	OutcomeUnavailable = "unavailable"
	// OutcomeCapped is a tool call past the cap of calls per answer or
	// per turn: it was not run.
	OutcomeCapped = "capped"
)

// ToolOutcomes are the outcomes of parley_tool_calls_total.
var ToolOutcomes = []string{OutcomeOK, OutcomeError, OutcomeTimeout, OutcomeDenied, OutcomeUnavailable, OutcomeCapped}

// ApprovalOutcomes are the outcomes of parley_tool_approvals_total (the
// states of a decided approval).
var ApprovalOutcomes = []string{"approved", "denied", "expired", "cancelled"}

// Skill load outcomes.
const (
	SkillInjected      = "injected"
	SkillAlreadyLoaded = "already_loaded"
	SkillOverBudget    = "over_budget"
	SkillUntrusted     = "untrusted"
	SkillNotFound      = "not_found"
	SkillDisabled      = "disabled"
	SkillDenied        = "denied"
)

// Outcomes of parley_deliveries_total.
const (
	DeliverySent    = "sent"
	DeliveryRetried = "retried"
	DeliveryFailed  = "failed"
)

// DeliveryOutcomes are the outcomes of parley_deliveries_total.
var DeliveryOutcomes = []string{DeliverySent, DeliveryRetried, DeliveryFailed}

// Outcomes of parley_files_sent_total.
const (
	FileSent    = "sent"
	FileRefused = "refused"
	FileFailed  = "failed"
	FileNoted   = "noted"
)

// FileOutcomes are the outcomes of parley_files_sent_total.
var FileOutcomes = []string{FileSent, FileRefused, FileFailed, FileNoted}

// Outcomes of parley_schedule_fires_total.
const (
	ScheduleFired  = "fired"
	ScheduleMissed = "missed"
	ScheduleError  = "error"
)

// ScheduleOutcomes are the outcomes of parley_schedule_fires_total.
var ScheduleOutcomes = []string{ScheduleFired, ScheduleMissed, ScheduleError}

// Outcomes of parley_trigger_requests_total.
const (
	TriggerPosted       = "posted"
	TriggerDuplicate    = "duplicate"
	TriggerUnauthorized = "unauthorized"
	TriggerInvalid      = "invalid"
	TriggerUnrouted     = "unrouted"
)

// TriggerOutcomes are the outcomes of parley_trigger_requests_total.
var TriggerOutcomes = []string{TriggerPosted, TriggerDuplicate, TriggerUnauthorized, TriggerInvalid, TriggerUnrouted}

// Metrics holds every collector. The zero value is not usable; call New.
type Metrics struct {
	Registry *prometheus.Registry
	// declared lists every Parley metric with its labels, for the checks
	// that dashboards, alerts and labels stay consistent with the code.
	declared []Declared

	MessagesReceived     *prometheus.CounterVec   // channel
	MessagesDeduplicated *prometheus.CounterVec   // channel
	MessagesRejected     *prometheus.CounterVec   // channel, reason
	RepliesSent          *prometheus.CounterVec   // channel, outcome
	TurnDuration         *prometheus.HistogramVec // channel, outcome
	TurnsInFlight        prometheus.Gauge
	QueueWaitSeconds     *prometheus.HistogramVec // channel
	ReplyFirstVisible    *prometheus.HistogramVec // channel: message received → first progress its user sees
	ReplyStreamFallbacks *prometheus.CounterVec   // channel, from, to: a live reply moved to a plainer way of showing it
	Attachments          *prometheus.CounterVec   // channel, kind, outcome: images and files of messages
	WebhookDuration      *prometheus.HistogramVec // route: a platform's POST, from its handler's call to its return

	LLMRequests  *prometheus.CounterVec   // model, outcome
	LLMLatency   *prometheus.HistogramVec // outcome
	LLMTokens    *prometheus.CounterVec   // channel, model, kind (prompt, completion, cached)
	LLMRetries   prometheus.Counter
	LLMFallbacks *prometheus.CounterVec // from, to

	ToolCalls        *prometheus.CounterVec   // channel, tool, outcome
	ToolCallDuration *prometheus.HistogramVec // tool
	MCPServerUp      *prometheus.GaugeVec     // server
	PolicyDenials    *prometheus.CounterVec   // channel, kind (tool, skill, access, admin)
	HistoryTrimmed   *prometheus.CounterVec   // channel
	QuotaRefusals    *prometheus.CounterVec   // channel, limit (user, workspace, budget)
	ToolApprovals    *prometheus.CounterVec   // channel, tool, outcome (approved, denied, expired, cancelled)
	ToolApprovalWait *prometheus.HistogramVec // channel
	BudgetUsed       *prometheus.HistogramVec // channel: a user's share of their daily token budget after a turn

	SkillLoads           *prometheus.CounterVec   // channel, skill, outcome
	SkillInjectionBytes  *prometheus.HistogramVec // channel, skill
	SkillReferenceReads  *prometheus.CounterVec   // channel, skill
	SkillReferenceWrites *prometheus.CounterVec   // channel, skill, outcome
	SkillInvocations     *prometheus.CounterVec   // channel, skill (manual /skill:NAME)
	SkillsKnown          *prometheus.GaugeVec     // source, state
	SkillIndexBytes      prometheus.Gauge
	SkillReloads         *prometheus.CounterVec // outcome
	Compactions          *prometheus.CounterVec // channel, outcome

	RedisUp prometheus.Gauge

	OutboxPending prometheus.Gauge       // replies waiting in the outbox, over every replica
	Deliveries    *prometheus.CounterVec // channel, outcome (sent, retried, failed)

	ChannelConnected *prometheus.GaugeVec     // channel: 1 while a long connection or poll is up
	AccountUp        *prometheus.GaugeVec     // channel, account: 1 while the account's app is signed in
	AccountMessages  *prometheus.CounterVec   // channel, account: messages received by each account's app
	Reconnects       *prometheus.CounterVec   // integration: sessions of a long connection after the first
	ChannelAPIErrors *prometheus.CounterVec   // channel, code: platform API failures by their error code
	PlatformCalls    *prometheus.CounterVec   // channel, method: requests made to a platform's API, each try counted
	OutboundFailures *prometheus.CounterVec   // integration, reason, outcome: failed attempts of the retry loop
	WeChatTokenAge   *prometheus.GaugeVec     // bot: age of the newest context_token of any user
	WeChatSendsSince *prometheus.HistogramVec // bot: sends since that user's last message, at each send

	ContextReads     *prometheus.CounterVec   // channel, outcome (ok, rate_limited, denied, error): reads of the room a turn was asked in
	ContextMessages  *prometheus.HistogramVec // channel: messages of the room a turn was given
	ContextBytes     *prometheus.HistogramVec // channel: bytes of the room a turn was given
	ScheduleFires    *prometheus.CounterVec   // schedule, outcome (fired, missed, error)
	ScheduleLateness prometheus.Histogram     // a fire's time from its fire time to its work queued
	TriggerRequests  *prometheus.CounterVec   // trigger (webhook name), outcome

	FilesSent      *prometheus.CounterVec // channel, outcome (sent, refused, failed, noted)
	FilesSentBytes *prometheus.CounterVec // channel: bytes of the files sent
}

// Outcomes of parley_context_reads_total besides OutcomeOK, OutcomeDenied
// and OutcomeError.
const OutcomeRateLimited = "rate_limited"

// ContextOutcomes are the outcomes of parley_context_reads_total.
var ContextOutcomes = []string{OutcomeOK, OutcomeRateLimited, OutcomeDenied, OutcomeError}

// New creates every collector on a fresh registry, together with the Go and
// process collectors an operator expects on any Go service.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{Registry: reg}
	f := factory{reg: reg, m: m}

	m.MessagesReceived = f.counter("parley_messages_received_total", "Messages received from a channel, before de-duplication.", "channel")
	m.MessagesDeduplicated = f.counter("parley_messages_deduplicated_total", "Messages dropped because their event or message id was seen before.", "channel")
	m.MessagesRejected = f.counter("parley_messages_rejected_total", "Inbound requests or messages refused, by reason (bad signature, too large, access, …).", "channel", "reason")
	m.RepliesSent = f.counter("parley_replies_sent_total", "Replies handed to a channel, by outcome.", "channel", "outcome")
	m.TurnDuration = f.histogram("parley_turn_duration_seconds", "Time from dequeue to the written turn, whose reply is sent next.", prometheus.ExponentialBuckets(0.05, 2, 12), "channel", "outcome")
	m.TurnsInFlight = f.gauge("parley_turns_in_flight", "Turns running on this replica.")
	m.QueueWaitSeconds = f.histogram("parley_queue_wait_seconds", "Time a message waited in its conversation queue before its turn started.", prometheus.ExponentialBuckets(0.001, 4, 10), "channel")
	m.ReplyFirstVisible = f.histogram("parley_reply_first_visible_seconds", "Time from a message's arrival to the first progress of its reply that the user sees, on channels that show replies while they are written.", []float64{0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20, 40}, "channel")
	m.Attachments = f.counter("parley_attachments_total", "Images and files that came with messages, by channel, kind (image, file) and outcome (ok, downscaled, named, no_vision, too_many, too_large, too_many_pixels, corrupt, unsupported, forbidden, not_found, failed).", "channel", "kind", "outcome")
	m.WebhookDuration = f.histogram("parley_webhook_duration_seconds", "Time this replica took to answer a platform's POST (a webhook, slash command or click), by route, from its handler's call to its return: the platform re-delivers what is not answered in time (Slack: 3 s).", prometheus.ExponentialBuckets(0.0005, 2, 14), "route")
	m.ReplyStreamFallbacks = f.counter("parley_reply_stream_fallbacks_total", "Live replies moved from one way of showing a reply to a plainer one, by channel, from and to (on Slack: stream, update, post; on Feishu: cardkit, patch, post), because the platform refused or failed the first.", "channel", "from", "to")

	m.LLMRequests = f.counter("parley_llm_requests_total", "Chat completion requests, by model (its name in the configuration: default, or a key of models) and outcome (ok, error, retry).", "model", "outcome")
	m.LLMLatency = f.histogram("parley_llm_request_duration_seconds", "Latency of one chat completion request.", prometheus.ExponentialBuckets(0.05, 2, 12), "outcome")
	m.LLMTokens = f.counter("parley_llm_tokens_total", "Tokens reported by the model, by channel, model (its name in the configuration) and kind (prompt, completion, cached, reasoning: completion tokens spent reasoning, where the provider reports them).", "channel", "model", "kind")
	m.LLMRetries = f.plainCounter("parley_llm_retries_total", "Chat completion requests retried after 429, 5xx or a timeout.")
	m.LLMFallbacks = f.counter("parley_llm_fallbacks_total", "Requests of a turn moved from a failed model to its next fallback, by model (its name in the configuration).", "from", "to")

	m.ToolCalls = f.counter("parley_tool_calls_total", "Tool calls by outcome: ok, error, timeout (the tool's own deadline), denied (by the channel's policy), unavailable (its MCP server is down), capped (past the calls allowed per answer or turn, not run).", "channel", "tool", "outcome")
	m.ToolCallDuration = f.histogram("parley_tool_call_duration_seconds", "Time one tool call ran, for the calls that ran (ok, error, timeout).", prometheus.ExponentialBuckets(0.005, 4, 9), "tool")
	m.MCPServerUp = f.gaugeVec("parley_mcp_server_up", "1 while this replica is connected to the configured MCP server, else 0.", "server")
	m.PolicyDenials = f.counter("parley_policy_denials_total", "Requests refused by a channel policy, by kind (tool, skill, access, admin).", "channel", "kind")
	m.QuotaRefusals = f.counter("parley_quota_refusals_total", "Messages refused before the model by a quota, by the limit that refused them: user (limits.user_per_minute), workspace (limits.workspace_per_minute) or budget (budget.tokens_per_user_day).", "channel", "limit")
	m.ToolApprovals = f.counter("parley_tool_approvals_total", "Tool calls that waited for a person's approval, by how they ended: approved, denied, expired (nobody decided within approval_timeout) or cancelled (/cancel).", "channel", "tool", "outcome")
	m.ToolApprovalWait = f.histogram("parley_tool_approval_wait_seconds", "Time from an approval prompt to its decision or expiry.", prometheus.ExponentialBuckets(1, 2, 12), "channel")
	m.BudgetUsed = f.histogram("parley_token_budget_used_ratio", "A user's tokens of the day over their budget.tokens_per_user_day, observed after each turn that counts against a budget (1 and above: the next message is refused).", []float64{0.1, 0.25, 0.5, 0.75, 0.9, 1, 1.25}, "channel")
	m.HistoryTrimmed = f.counter("parley_history_trimmed_total", "Turns whose history was cut to the configured maximum length.", "channel")

	m.SkillLoads = f.counter("parley_skill_loads_total", "load_skill calls by outcome (injected, already_loaded, over_budget, untrusted, not_found, disabled, denied).", "channel", "skill", "outcome")
	m.SkillInjectionBytes = f.histogram("parley_skill_injection_bytes", "Size of skill injections added to a conversation.", prometheus.ExponentialBuckets(256, 2, 8), "channel", "skill")
	m.SkillReferenceReads = f.counter("parley_skill_reference_reads_total", "Files read from a skill folder with load_skill(file=…).", "channel", "skill")
	m.SkillReferenceWrites = f.counter("parley_skill_reference_writes_total", "save_skill_reference calls by outcome.", "channel", "skill", "outcome")
	m.SkillInvocations = f.counter("parley_skill_invocations_total", "Manual /skill:NAME invocations.", "channel", "skill")
	m.SkillsKnown = f.gaugeVec("parley_skills", "Skills known, by source (builtin, user, workspace) and state (enabled, disabled).", "source", "state")
	m.SkillIndexBytes = f.gauge("parley_skill_index_bytes", "Size of the skill index section of the system prompt.")
	m.SkillReloads = f.counter("parley_skill_reloads_total", "Skill registry reloads, by outcome.", "outcome")
	m.Compactions = f.counter("parley_compactions_total", "History compactions, by outcome.", "channel", "outcome")

	m.OutboxPending = f.gauge("parley_outbox_pending", "Replies waiting in the outbox for another try, counted in the Redis every replica shares (each replica reports the same number).")
	m.Deliveries = f.counter("parley_deliveries_total", "Replies delivered through the outbox's paced, resumable path, by outcome: sent (every part posted), retried (a failure that may pass; tried again later), failed (given up: refused for good, or not delivered within outbox.max_age).", "channel", "outcome")
	m.RedisUp = f.gauge("parley_redis_up", "1 when the last Redis health check succeeded, else 0.")

	m.ChannelConnected = f.gaugeVec("parley_channel_connected", "1 while a channel's long connection or long poll is up on this replica, else 0.", "channel")
	m.AccountUp = f.gaugeVec("parley_account_up", "1 while an account (an app of a platform: slack.accounts.NAME, or default for the section's own) is signed in on this replica, else 0 (its token was refused, or it has not signed in yet).", "channel", "account")
	m.AccountMessages = f.counter("parley_account_messages_received_total", "Messages received by each account (app) of a platform, before de-duplication; account is default for the section's own app.", "channel", "account")
	m.Reconnects = f.counter("parley_reconnects_total", "Reconnects, by integration: a platform's long connection or long poll (slack, feishu, wechat, …), an MCP server (mcp), Redis answering again after it did not (redis).", "integration")
	m.ChannelAPIErrors = f.counter("parley_channel_api_errors_total", "Platform API calls that failed, by the platform's error code.", "channel", "code")
	m.PlatformCalls = f.counter("parley_platform_calls_total", "Requests sent to a platform's API, by method; every try and redirect counts, as the platform's quota counts them.", "channel", "method")
	m.OutboundFailures = f.counter("parley_outbound_failures_total", "Failed attempts of outbound calls (model, platform APIs), by integration, reason and outcome: retry (tried again) or error (the call failed).", "integration", "reason", "outcome")
	m.WeChatTokenAge = f.gaugeVec("parley_wechat_context_token_age_seconds", "Age of the newest iLink context_token of each logged-in bot: replies are only possible while it is fresh.", "bot")
	m.WeChatSendsSince = f.histogram("parley_wechat_sends_since_user_message", "Messages sent to a WeChat user since that user last wrote, observed at each send.", []float64{1, 2, 3, 5, 8, 10, 15}, "bot")

	m.ContextReads = f.counter("parley_context_reads_total", "Reads of the room a turn was asked in (the thread, the chat's recent messages, the ambient messages kept for it), by outcome: ok, rate_limited (the platform refused for its rate limit; the turn answered without), denied (the app may not read there), error.", "channel", "outcome")
	m.ContextMessages = f.histogram("parley_context_messages", "Messages of the room given to a turn, after the bot's own and the budget were taken out.", []float64{0, 1, 2, 5, 10, 20, 50, 100, 200}, "channel")
	m.ContextBytes = f.histogram("parley_context_bytes", "Bytes of the room given to a turn, as rendered into its user message.", prometheus.ExponentialBuckets(256, 2, 10), "channel")
	m.ScheduleFires = f.counter("parley_schedule_fires_total", "Fire times of schedules, by schedule (its name in triggers.schedules, or chat for those added with /schedule) and outcome: fired (its work queued, on one replica), missed (passed while no replica ran, skipped), error (not queued; tried again once its claim's lease ends).", "schedule", "outcome")
	m.ScheduleLateness = f.plainHistogram("parley_schedule_lateness_seconds", "Time from a schedule's fire time to its work queued.", []float64{0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900})

	m.TriggerRequests = f.counter("parley_trigger_requests_total", "Requests to a webhook trigger (POST /hooks/NAME), by webhook and outcome: posted (queued durably to be posted), duplicate (the same notification, from an HA peer or a retry, within its dedup_window), unauthorized (no valid token or signature; nothing posted), invalid (too big, not JSON, or a payload of the wrong kind), unrouted (no route and no default destination).", "trigger", "outcome")

	m.FilesSent = f.counter("parley_files_sent_total", "Files a turn sent with its answer (send_file), by outcome: sent (uploaded natively), refused (over the platform's limit for files, or gone; the user is told in text), failed (the upload was given up; the user is told in text), noted (the channel cannot take that kind of file: its caption and a note went in text).", "channel", "outcome")
	m.FilesSentBytes = f.counter("parley_files_sent_bytes_total", "Bytes of the files uploaded natively, as sent (an image after scaling down).", "channel")

	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Prime creates the series an operator alerts on at zero for each channel,
// so that the first error shows as an increase rather than as a new series
// that increase() cannot see.
func (m *Metrics) Prime(channels ...string) {
	for _, ch := range channels {
		m.MessagesReceived.WithLabelValues(ch)
		for _, o := range []string{OutcomeOK, OutcomeError} {
			m.RepliesSent.WithLabelValues(ch, o)
			m.TurnDuration.WithLabelValues(ch, o)
		}
		for _, o := range DeliveryOutcomes {
			m.Deliveries.WithLabelValues(ch, o)
		}
		for _, o := range ContextOutcomes {
			m.ContextReads.WithLabelValues(ch, o)
		}
	}
	for _, o := range []string{OutcomeOK, OutcomeError} {
		m.SkillReloads.WithLabelValues(o)
	}
}

// PrimeModels creates the model request series of every outcome at zero
// for each model (its key in the configuration), and the fallback series
// of each step of each model's chain of fallbacks (the whole chain tried
// after it, in order), so that alerts see the first error and the first
// fallback. Models are bounded by the configuration.
func (m *Metrics) PrimeModels(chains map[string][]string) {
	for model, chain := range chains {
		for _, o := range []string{OutcomeOK, OutcomeError, OutcomeRetry} {
			m.LLMRequests.WithLabelValues(model, o)
		}
		from := model
		for _, to := range chain {
			m.LLMFallbacks.WithLabelValues(from, to)
			from = to
		}
	}
}

// PrimeTriggers creates the request series of every outcome at zero for
// each webhook, so that the alert on a webhook refusing its sender sees
// its first refusal.
func (m *Metrics) PrimeTriggers(webhooks ...string) {
	for _, w := range webhooks {
		for _, o := range TriggerOutcomes {
			m.TriggerRequests.WithLabelValues(w, o)
		}
	}
}

// PrimeSchedules creates the fire series of every outcome at zero for
// each schedule label (the file's names and chat), so that the alert on
// a failed schedule sees its first failure.
func (m *Metrics) PrimeSchedules(schedules ...string) {
	for _, s := range schedules {
		for _, o := range ScheduleOutcomes {
			m.ScheduleFires.WithLabelValues(s, o)
		}
	}
}

// ForgetTools deletes every tool series (calls, call durations,
// approvals) of the tools named. Tool series are made on first use, not
// primed: a tool that is never called, or can never wait for approval,
// costs nothing; deleting those of a tool that is gone (an MCP server no
// longer lists it) keeps /metrics bounded by the tools offered now, even
// for a server that renames its tools on every reconnect.
func (m *Metrics) ForgetTools(tools ...string) {
	for _, tool := range tools {
		match := prometheus.Labels{"tool": tool}
		m.ToolCalls.DeletePartialMatch(match)
		m.ToolCallDuration.DeletePartialMatch(match)
		m.ToolApprovals.DeletePartialMatch(match)
	}
}

// Declared describes one Parley metric.
type Declared struct {
	Name   string
	Type   string // counter, gauge or histogram
	Labels []string
}

// Declared lists every Parley metric (not the Go and process collectors).
func (m *Metrics) Declared() []Declared { return append([]Declared(nil), m.declared...) }

// SeriesNames lists every series name a scrape can show for Parley's own
// metrics: histograms add _bucket, _sum and _count.
func (m *Metrics) SeriesNames() []string {
	var out []string
	for _, d := range m.declared {
		if d.Type == "histogram" {
			out = append(out, d.Name+"_bucket", d.Name+"_sum", d.Name+"_count")
			continue
		}
		out = append(out, d.Name)
	}
	return out
}

type factory struct {
	reg prometheus.Registerer
	m   *Metrics
}

func (f factory) declare(name, typ string, labels []string) {
	f.m.declared = append(f.m.declared, Declared{Name: name, Type: typ, Labels: labels})
}

func (f factory) counter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	f.declare(name, "counter", labels)
	return c
}

func (f factory) plainCounter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	f.declare(name, "counter", nil)
	return c
}

func (f factory) histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	f.declare(name, "histogram", labels)
	return h
}

func (f factory) plainHistogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	f.declare(name, "histogram", nil)
	return h
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	f.declare(name, "gauge", nil)
	return g
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	f.declare(name, "gauge", labels)
	return g
}
