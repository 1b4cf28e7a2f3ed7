// Package question reads the questions a tool's server asks a person (an
// MCP elicitation's requested schema) as a form, and reads the person's
// answer — typed in the chat or clicked — into the values the schema
// asks for, refusing what it does not allow. It knows nothing of Redis or
// the platforms: the gateway shows the form and hands it what came back.
package question

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds on a form, so that a server cannot make a question too large to
// show or to answer.
const (
	MaxFields  = 10
	MaxChoices = 25
)

// Types of a field.
const (
	TypeString  = "string"
	TypeNumber  = "number"
	TypeInteger = "integer"
	TypeBoolean = "boolean"
	TypeEnum    = "enum"  // a string with fixed choices
	TypeMulti   = "multi" // an array of fixed choices
)

// Form is a question's fields, in the schema's order of required first,
// then by name (a JSON object has no order of its own).
type Form struct {
	Fields []Field
}

// Field is one value the server asks for.
type Field struct {
	Name, Title, Description string
	Type                     string
	Required                 bool
	Choices                  []Choice // TypeEnum and TypeMulti
	Format                   string   // email, uri, date, date-time
	MinLength, MaxLength     *int
	Minimum, Maximum         *float64
	Default                  any
}

// Choice is one fixed value of a field, with how it is shown.
type Choice struct{ Value, Label string }

// property is the part of a JSON schema a form reads.
type property struct {
	Type        string        `json:"type"`
	Title       string        `json:"title"`
	Description string        `json:"description"`
	Enum        []string      `json:"enum"`
	EnumNames   []string      `json:"enumNames"`
	OneOf       []constChoice `json:"oneOf"`
	AnyOf       []constChoice `json:"anyOf"`
	Items       *property     `json:"items"`
	Format      string        `json:"format"`
	MinLength   *int          `json:"minLength"`
	MaxLength   *int          `json:"maxLength"`
	Minimum     *float64      `json:"minimum"`
	Maximum     *float64      `json:"maximum"`
	Default     any           `json:"default"`
}

type constChoice struct {
	Const string `json:"const"`
	Title string `json:"title"`
}

// ErrSchema is wrapped by Parse for a schema it cannot ask.
var ErrSchema = errors.New("question: a requested schema Parley cannot ask")

// Parse reads a requested schema: an object of flat properties (string,
// number, integer, boolean, a string with choices, an array of choices).
// An empty schema is a form of no fields (a confirmation).
func Parse(raw json.RawMessage) (Form, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return Form{}, nil
	}
	var s struct {
		Type       string              `json:"type"`
		Properties map[string]property `json:"properties"`
		Required   []string            `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return Form{}, fmt.Errorf("%w: %v", ErrSchema, err)
	}
	if s.Type != "" && s.Type != "object" {
		return Form{}, fmt.Errorf("%w: type %q is not an object", ErrSchema, s.Type)
	}
	if len(s.Properties) > MaxFields {
		return Form{}, fmt.Errorf("%w: %d fields (at most %d)", ErrSchema, len(s.Properties), MaxFields)
	}
	var f Form
	for name, p := range s.Properties {
		field, err := fieldOf(name, p, slices.Contains(s.Required, name))
		if err != nil {
			return Form{}, err
		}
		f.Fields = append(f.Fields, field)
	}
	slices.SortFunc(f.Fields, func(a, b Field) int {
		if a.Required != b.Required {
			if a.Required {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return f, nil
}

// fieldOf reads one property.
func fieldOf(name string, p property, required bool) (Field, error) {
	if !validName(name) {
		return Field{}, fmt.Errorf("%w: a field named %q", ErrSchema, name)
	}
	f := Field{Name: name, Title: p.Title, Description: p.Description, Required: required, Format: p.Format,
		MinLength: p.MinLength, MaxLength: p.MaxLength, Minimum: p.Minimum, Maximum: p.Maximum, Default: p.Default}
	switch {
	case p.Type == "array" && p.Items != nil:
		f.Type, f.Choices = TypeMulti, choicesOf(*p.Items)
	case p.Type == TypeString && len(choicesOf(p)) > 0:
		f.Type, f.Choices = TypeEnum, choicesOf(p)
	case p.Type == TypeString, p.Type == TypeNumber, p.Type == TypeInteger, p.Type == TypeBoolean:
		f.Type = p.Type
	default:
		return Field{}, fmt.Errorf("%w: field %q of type %q", ErrSchema, name, p.Type)
	}
	if (f.Type == TypeMulti || f.Type == TypeEnum) && (len(f.Choices) == 0 || len(f.Choices) > MaxChoices) {
		return Field{}, fmt.Errorf("%w: field %q with %d choices", ErrSchema, name, len(f.Choices))
	}
	return f, nil
}

// choicesOf is a property's fixed values: enum (with enumNames) or
// oneOf/anyOf of consts with titles.
func choicesOf(p property) []Choice {
	var out []Choice
	for i, v := range p.Enum {
		label := v
		if i < len(p.EnumNames) && p.EnumNames[i] != "" {
			label = p.EnumNames[i]
		}
		out = append(out, Choice{Value: v, Label: label})
	}
	for _, c := range append(p.OneOf, p.AnyOf...) {
		label := c.Title
		if label == "" {
			label = c.Const
		}
		out = append(out, Choice{Value: c.Const, Label: label})
	}
	return out
}

// validName is a field name that can be typed: letters, digits, _ and -.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Choices are the buttons of a form that has one field with fixed
// choices (a boolean is yes or no); nil for any other form.
func (f Form) Choices() []Choice {
	if len(f.Fields) != 1 {
		return nil
	}
	switch fd := f.Fields[0]; fd.Type {
	case TypeBoolean:
		return []Choice{{Value: "true", Label: "Yes"}, {Value: "false", Label: "No"}}
	case TypeEnum:
		return fd.Choices
	}
	return nil
}

// ErrAnswer is wrapped by Read for an answer the form does not allow;
// its message says why, for the person.
var ErrAnswer = errors.New("that answer does not fit")

// Read reads what the person typed (or the value of the button they
// clicked) into the form's values. One field takes the whole text; more
// take a line "name: value" each, or a JSON object.
func (f Form) Read(text string) (map[string]any, error) {
	text = strings.TrimSpace(text)
	raw := map[string]string{}
	switch {
	case len(f.Fields) == 0:
	case len(f.Fields) == 1:
		if text != "" {
			raw[f.Fields[0].Name] = text
		}
	case strings.HasPrefix(text, "{"):
		var obj map[string]any
		if err := json.Unmarshal([]byte(text), &obj); err != nil {
			return nil, fmt.Errorf("%w: it is not a JSON object", ErrAnswer)
		}
		for k, v := range obj {
			if s, ok := v.(string); ok {
				raw[k] = s
			} else {
				b, _ := json.Marshal(v)
				raw[k] = string(b)
			}
		}
	default:
		for line := range strings.SplitSeq(text, "\n") {
			name, value, ok := cutField(line)
			if !ok {
				continue
			}
			raw[name] = value
		}
	}
	return f.values(raw)
}

// cutField splits "name: value" or "name = value".
func cutField(line string) (name, value string, ok bool) {
	i := strings.IndexAny(line, ":=")
	if i <= 0 {
		return "", "", false
	}
	name = strings.TrimLeft(strings.TrimSpace(line[:i]), "-•* ")
	return strings.Trim(name, "`"), strings.TrimSpace(line[i+1:]), true
}

// values checks raw against every field.
func (f Form) values(raw map[string]string) (map[string]any, error) {
	out := map[string]any{}
	for _, fd := range f.Fields {
		s, ok := raw[fd.Name]
		delete(raw, fd.Name)
		if !ok || s == "" {
			switch {
			case fd.Default != nil:
				out[fd.Name] = fd.Default
			case fd.Required:
				return nil, fmt.Errorf("%w: %s is required", ErrAnswer, fd.label())
			}
			continue
		}
		v, err := fd.value(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %s %v", ErrAnswer, fd.label(), err)
		}
		out[fd.Name] = v
	}
	for name := range raw {
		return nil, fmt.Errorf("%w: there is no field %q", ErrAnswer, name)
	}
	return out, nil
}

func (fd Field) label() string {
	if fd.Title != "" {
		return fd.Title
	}
	return fd.Name
}

// value reads one field's text.
func (fd Field) value(s string) (any, error) {
	switch fd.Type {
	case TypeBoolean:
		switch strings.ToLower(s) {
		case "yes", "y", "true", "1", "ok", "on":
			return true, nil
		case "no", "n", "false", "0", "off":
			return false, nil
		}
		return nil, errors.New("must be yes or no")
	case TypeNumber, TypeInteger:
		return fd.number(s)
	case TypeEnum:
		return fd.choice(s)
	case TypeMulti:
		var vs []string
		for part := range strings.SplitSeq(s, ",") {
			v, err := fd.choice(strings.TrimSpace(part))
			if err != nil {
				return nil, err
			}
			vs = append(vs, v)
		}
		return vs, nil
	}
	return fd.text(s)
}

func (fd Field) number(s string) (any, error) {
	n, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, errors.New("must be a number")
	}
	if fd.Minimum != nil && n < *fd.Minimum || fd.Maximum != nil && n > *fd.Maximum {
		return nil, fmt.Errorf("must be between %s and %s", bound(fd.Minimum, "-∞"), bound(fd.Maximum, "∞"))
	}
	if fd.Type == TypeInteger {
		if n != float64(int64(n)) {
			return nil, errors.New("must be a whole number")
		}
		return int64(n), nil
	}
	return n, nil
}

func bound(f *float64, none string) string {
	if f == nil {
		return none
	}
	return strconv.FormatFloat(*f, 'g', -1, 64)
}

// choice matches a value or a label (in any case), or a choice's number.
func (fd Field) choice(s string) (string, error) {
	for _, c := range fd.Choices {
		if strings.EqualFold(s, c.Value) || strings.EqualFold(s, c.Label) {
			return c.Value, nil
		}
	}
	if i, err := strconv.Atoi(s); err == nil && i >= 1 && i <= len(fd.Choices) {
		return fd.Choices[i-1].Value, nil
	}
	return "", errors.New("must be one of the choices")
}

func (fd Field) text(s string) (any, error) {
	n := utf8.RuneCountInString(s)
	if fd.MinLength != nil && n < *fd.MinLength {
		return nil, fmt.Errorf("must be at least %d characters", *fd.MinLength)
	}
	if fd.MaxLength != nil && n > *fd.MaxLength {
		return nil, fmt.Errorf("must be at most %d characters", *fd.MaxLength)
	}
	var ok bool
	switch fd.Format {
	case "email":
		a, err := mail.ParseAddress(s)
		ok = err == nil && a.Address == s
	case "uri":
		u, err := url.Parse(s)
		ok = err == nil && u.Scheme != "" && u.Host != ""
	case "date":
		_, err := time.Parse(time.DateOnly, s)
		ok = err == nil
	case "date-time":
		_, err := time.Parse(time.RFC3339, s)
		ok = err == nil
	default:
		ok = true
	}
	if !ok {
		return nil, fmt.Errorf("must be a valid %s", fd.Format)
	}
	return s, nil
}
