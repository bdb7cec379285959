package scriptedmodel

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseScript(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		wantErr string // "" = valid
		check   func(t *testing.T, sc Script)
	}{
		{name: "full", in: `{"steps":[{"tool":"files.read","arguments":{"path":["README.md"]}},{"tool":"files.list"}],"final":"done"}`,
			check: func(t *testing.T, sc Script) {
				if len(sc.Steps) != 2 || sc.Steps[0].Tool != "files.read" || sc.Final != "done" {
					t.Fatalf("got %+v", sc)
				}
				if string(sc.Steps[0].Arguments) != `{"path":["README.md"]}` || string(sc.Steps[1].Arguments) != `{}` {
					t.Fatalf("arguments %s / %s", sc.Steps[0].Arguments, sc.Steps[1].Arguments)
				}
			}},
		{name: "arguments compacted", in: "{\"steps\":[{\"tool\":\"a\",\"arguments\":{ \"x\" : [ 1 , 2 ] }}],\"final\":\"f\"}",
			check: func(t *testing.T, sc Script) {
				if string(sc.Steps[0].Arguments) != `{"x":[1,2]}` {
					t.Fatalf("arguments %s", sc.Steps[0].Arguments)
				}
			}},
		{name: "null arguments", in: `{"steps":[{"tool":"a","arguments":null}],"final":"f"}`},
		{name: "local step", in: `{"steps":[{"tool":"Bash","local":true,"arguments":{"command":"id"}}],"final":"f"}`,
			check: func(t *testing.T, sc Script) {
				if !sc.Steps[0].Local {
					t.Fatal("local lost")
				}
			}},
		{name: "no steps", in: `{"final":"only text"}`},
		{name: "null steps", in: `{"steps":null,"final":"only text"}`},
		{name: "unknown top key", in: `{"steps":[],"final":"f","model":"x"}`, wantErr: `unknown key "model"`},
		{name: "unknown step key", in: `{"steps":[{"tool":"a","args":{}}],"final":"f"}`, wantErr: `step 0: step: unknown key "args"`},
		{name: "key in wrong case", in: `{"Steps":[],"final":"f"}`, wantErr: `unknown key "Steps"`},
		{name: "duplicate key", in: `{"final":"a","final":"b"}`, wantErr: `given twice`},
		{name: "empty tool", in: `{"steps":[{"tool":""}],"final":"f"}`, wantErr: "tool must not be empty"},
		{name: "missing tool", in: `{"steps":[{"arguments":{}}],"final":"f"}`, wantErr: "tool is required"},
		{name: "tool with space", in: `{"steps":[{"tool":"files read"}],"final":"f"}`, wantErr: "no spaces"},
		{name: "tool not a string", in: `{"steps":[{"tool":7}],"final":"f"}`, wantErr: "tool must be a string"},
		{name: "local not a bool", in: `{"steps":[{"tool":"a","local":"yes"}],"final":"f"}`, wantErr: "local must be a boolean"},
		{name: "arguments array", in: `{"steps":[{"tool":"a","arguments":["x"]}],"final":"f"}`, wantErr: "must be a JSON object"},
		{name: "arguments string", in: `{"steps":[{"tool":"a","arguments":"{}"}],"final":"f"}`, wantErr: "must be a JSON object"},
		{name: "steps not array", in: `{"steps":{},"final":"f"}`, wantErr: "steps must be an array"},
		{name: "missing final", in: `{"steps":[]}`, wantErr: "final is required"},
		{name: "empty final", in: `{"steps":[],"final":""}`, wantErr: "non-empty"},
		{name: "final not a string", in: `{"final":1}`, wantErr: "final must be a string"},
		{name: "not an object", in: `[]`, wantErr: "must be a JSON object"},
		{name: "trailing data", in: `{"final":"f"} {}`, wantErr: "trailing data"},
		{name: "truncated", in: `{"final":"f"`, wantErr: "script"},
		{name: "empty", in: ``, wantErr: "script"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc, err := ParseScript([]byte(c.in))
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if c.check != nil {
					c.check(t, sc)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, c.wantErr)
			}
		})
	}
}

func TestDemoScript(t *testing.T) {
	sc := DemoScript()
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	// The demo must survive a round trip through the strict parser, since the
	// launcher may write it out as an example script.
	data, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseScript(data)
	if err != nil {
		t.Fatalf("demo does not parse back: %v\n%s", err, data)
	}
	if len(back.Steps) != 2 || back.Steps[0].Tool != "files.list" || back.Steps[1].Tool != "files.read" {
		t.Fatalf("demo steps: %+v", back.Steps)
	}
}

func TestNewRejectsInvalidScript(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("an empty script was accepted")
	}
	if _, err := New(Options{Script: Script{Steps: []Step{{Tool: ""}}, Final: "f"}}); err == nil {
		t.Fatal("an empty tool name was accepted")
	}
	if _, err := New(Options{Script: Script{Steps: []Step{{Tool: "a", Arguments: json.RawMessage(`[1]`)}}, Final: "f"}}); err == nil {
		t.Fatal("array arguments were accepted")
	}
	// New normalises its own copy, never the caller's script.
	sc := Script{Steps: []Step{{Tool: "a"}}, Final: "f"}
	if _, err := New(Options{Script: sc}); err != nil {
		t.Fatal(err)
	}
	if sc.Steps[0].Arguments != nil {
		t.Fatalf("caller's script was modified: %s", sc.Steps[0].Arguments)
	}
}
