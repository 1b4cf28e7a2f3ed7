package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Notification is one alert notification, of Alertmanager or Grafana,
// with only the fields Parley reads.
type Notification struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []Alert           `json:"alerts"`
	// Grafana's: its organisation and title.
	OrgID *int64 `json:"orgId,omitempty"`
	Title string `json:"title,omitempty"`
}

// Alert is one alert of a notification.
type Alert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
	// Grafana's links.
	DashboardURL string `json:"dashboardURL,omitempty"`
	PanelURL     string `json:"panelURL,omitempty"`
}

// Statuses of a notification and an alert.
const (
	StatusFiring   = "firing"
	StatusResolved = "resolved"
)

// decodeAlerts reads body as a notification of kind (alertmanager or
// grafana), refusing a payload of the other kind or of neither.
func decodeAlerts(kind string, body []byte) (*Notification, error) {
	var n Notification
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, fmt.Errorf("not a JSON notification: %w", err)
	}
	switch {
	case kind == KindAlertmanager && (n.Version != "4" || n.OrgID != nil):
		return nil, fmt.Errorf("not an Alertmanager version 4 notification (version %q)", n.Version)
	case kind == KindGrafana && n.OrgID == nil:
		return nil, errors.New("not a Grafana alerting notification (no orgId)")
	case n.Status != StatusFiring && n.Status != StatusResolved:
		return nil, fmt.Errorf("status %q is neither firing nor resolved", n.Status)
	case len(n.Alerts) == 0:
		return nil, errors.New("a notification without alerts")
	}
	if n.GroupKey == "" {
		// Grafana without a group key: the set of its alerts' fingerprints.
		n.GroupKey = "fingerprints:" + strings.Join(n.fingerprints(), ",")
	}
	return &n, nil
}

// fingerprints are the alerts' fingerprints, sorted.
func (n *Notification) fingerprints() []string {
	out := make([]string, 0, len(n.Alerts))
	for _, a := range n.Alerts {
		out = append(out, a.Fingerprint)
	}
	slices.Sort(out)
	return out
}

// Identity names the notification across senders and retries: the same
// group, status and alerts (fingerprint, start and end) are the same
// notification, whichever Alertmanager of an HA pair sent it.
func (n *Notification) Identity() string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q\n", n.GroupKey, n.Status)
	lines := make([]string, 0, len(n.Alerts))
	for _, a := range n.Alerts {
		lines = append(lines, fmt.Sprintf("%q %d %d", a.Fingerprint, a.StartsAt.UnixNano(), a.EndsAt.UnixNano()))
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Fprintln(h, l)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// labels is what routes match: the common labels, then the group's.
func (n *Notification) labels() map[string]string {
	out := map[string]string{}
	maps.Copy(out, n.CommonLabels)
	maps.Copy(out, n.GroupLabels)
	if len(out) == 0 && len(n.Alerts) > 0 {
		maps.Copy(out, n.Alerts[0].Labels)
	}
	return out
}
