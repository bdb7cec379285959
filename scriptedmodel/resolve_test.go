package scriptedmodel

import (
	"encoding/json"
	"strings"
	"testing"
)

func flat(names ...string) []offeredTool {
	var out []offeredTool
	for _, n := range names {
		out = append(out, offeredTool{Name: n})
	}
	return out
}

func TestResolve(t *testing.T) {
	read := Step{Tool: "files.read", Arguments: json.RawMessage(`{"path":["README.md"]}`)}
	codexNS := []offeredTool{
		{Name: "list_mcp_resources"}, {Name: "read_mcp_resource"},
		{Name: "files_read", Namespace: "mcp__sharedos"}, {Name: "files_list", Namespace: "mcp__sharedos"},
	}
	codeMode := []offeredTool{
		{Name: "exec", Namespace: "functions", Custom: true}, {Name: "wait", Namespace: "functions"},
		{Name: "curr_time", Namespace: "clock"},
	}
	cases := []struct {
		name      string
		step      Step
		offered   []offeredTool
		wantName  string
		wantNS    string
		wantVia   string
		offeredOK bool
		check     func(t *testing.T, c call)
	}{
		{"exact canonical", read, flat("files.read", "files_read"), "files.read", "", ViaExact, true, nil},
		{"portable", read, flat("other", "files_read"), "files_read", "", ViaPortable, true, nil},
		{"claude / pi native prefix", read, flat("mcp__sharedos__files_list", "mcp__sharedos__files_read"), "mcp__sharedos__files_read", "", ViaMCPPrefixed, true, nil},
		{"prefix with canonical name", read, flat("mcp__sharedos__files.read"), "mcp__sharedos__files.read", "", ViaMCPPrefixed, true, nil},
		{"prefix portable preferred over prefix canonical", read, flat("mcp__sharedos__files.read", "mcp__sharedos__files_read"), "mcp__sharedos__files_read", "", ViaMCPPrefixed, true, nil},
		{"codex namespace portable", read, codexNS, "files_read", "mcp__sharedos", ViaCodexNamespace, true, nil},
		{"codex namespace canonical", read, []offeredTool{{Name: "files.read", Namespace: "mcp__sharedos"}}, "files.read", "mcp__sharedos", ViaCodexNamespace, true, nil},
		{"tool in functions namespace counts as flat", read, []offeredTool{{Name: "mcp__sharedos__files_read", Namespace: "functions"}}, "mcp__sharedos__files_read", "functions", ViaMCPPrefixed, true, nil},
		{"pi adapter direct", read, flat("sharedos_files_list", "sharedos_files_read"), "sharedos_files_read", "", ViaPiAdapter, true, nil},
		{"pi adapter direct canonical", read, flat("sharedos_files.read"), "sharedos_files.read", "", ViaPiAdapter, true, nil},
		{"pi adapter proxy, object args", read, flat("mcp"), "mcp", "", ViaPiAdapterProxy, true, func(t *testing.T, c call) {
			if string(c.Args) != `{"args":{"path":["README.md"]},"tool":"sharedos_files_read"}` {
				t.Fatalf("proxy args %s", c.Args)
			}
		}},
		{"pi adapter proxy, string args", read, []offeredTool{{Name: "mcp", ArgsString: true}}, "mcp", "", ViaPiAdapterProxy, true, func(t *testing.T, c call) {
			if string(c.Args) != `{"args":"{\"path\":[\"README.md\"]}","tool":"sharedos_files_read"}` {
				t.Fatalf("proxy args %s", c.Args)
			}
		}},
		{"codex code mode", read, codeMode, "exec", "functions", ViaCodexCodeMode, true, func(t *testing.T, c call) {
			want := "const r = await tools.mcp__sharedos__files_read({\"path\":[\"README.md\"]});\ntext(JSON.stringify(r));"
			if !c.Custom || c.Input != want {
				t.Fatalf("code mode call %+v", c)
			}
		}},
		{"code mode identifier sanitised", Step{Tool: "net.http-get", Arguments: json.RawMessage(`{}`)}, codeMode, "exec", "functions", ViaCodexCodeMode, true, func(t *testing.T, c call) {
			if !strings.Contains(c.Input, "tools.mcp__sharedos__net_http_get({})") {
				t.Fatalf("input %q", c.Input)
			}
		}},
		{"direct tool beats code mode", read, append(flat("mcp__sharedos__files_read"), codeMode...), "mcp__sharedos__files_read", "", ViaMCPPrefixed, true, nil},
		{"direct adapter tool beats proxy", read, flat("mcp", "sharedos_files_read"), "sharedos_files_read", "", ViaPiAdapter, true, nil},
		{"proxy beats code mode", read, append(flat("mcp"), codeMode...), "mcp", "", ViaPiAdapterProxy, true, nil},
		// Ambiguity is settled by the documented order, never by offer order.
		{"exact beats prefixed, whatever the offer order", read, flat("mcp__sharedos__files_read", "sharedos_files_read", "files.read"), "files.read", "", ViaExact, true, nil},
		{"prefixed beats adapter", read, flat("sharedos_files_read", "mcp__sharedos__files_read"), "mcp__sharedos__files_read", "", ViaMCPPrefixed, true, nil},
		{"flat prefixed beats namespaced", read, append(codexNS, flat("mcp__sharedos__files_read")...), "mcp__sharedos__files_read", "", ViaMCPPrefixed, true, nil},
		{"another server's tools are not ours", read, append(flat("mcp__other__files_read", "other_files_read"), offeredTool{Name: "files_read", Namespace: "mcp__other"}), "mcp__sharedos__files_read", "", ViaNotOffered, false, nil},
		{"exec that is not freeform is not code mode", read, flat("exec"), "mcp__sharedos__files_read", "", ViaNotOffered, false, nil},
		{"missing: best guess", read, flat("mcp__sharedos__files_list"), "mcp__sharedos__files_read", "", ViaNotOffered, false, func(t *testing.T, c call) {
			if string(c.Args) != `{"path":["README.md"]}` {
				t.Fatalf("args %s", c.Args)
			}
		}},
		{"local offered", Step{Tool: "Bash", Local: true, Arguments: json.RawMessage(`{"command":"id"}`)}, flat("Bash", "mcp__sharedos__files_read"), "Bash", "", ViaLocal, true, nil},
		{"local not offered, emitted anyway", Step{Tool: "Bash", Local: true}, flat("mcp__sharedos__files_read"), "Bash", "", ViaLocal, false, func(t *testing.T, c call) {
			if string(c.Args) != `{}` {
				t.Fatalf("args %s", c.Args)
			}
		}},
		{"local name is exact, not prefixed", Step{Tool: "files.read", Local: true}, flat("mcp__sharedos__files_read"), "files.read", "", ViaLocal, false, nil},
		{"local freeform tool", Step{Tool: "apply_patch", Local: true, Arguments: json.RawMessage(`{"input":"*** Begin Patch"}`)},
			[]offeredTool{{Name: "apply_patch", Namespace: "functions", Custom: true}}, "apply_patch", "functions", ViaLocal, true, func(t *testing.T, c call) {
				if !c.Custom || c.Input != "*** Begin Patch" {
					t.Fatalf("call %+v", c)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := resolve(c.step, c.offered, "sharedos")
			if got.Name != c.wantName || got.Namespace != c.wantNS || got.Via != c.wantVia || got.Offered != c.offeredOK {
				t.Fatalf("resolve = {name %q ns %q via %q offered %v}, want {%q %q %q %v}",
					got.Name, got.Namespace, got.Via, got.Offered, c.wantName, c.wantNS, c.wantVia, c.offeredOK)
			}
			if c.check != nil {
				c.check(t, got)
			}
		})
	}
}

func TestResolveOtherServerName(t *testing.T) {
	st := Step{Tool: "files.read"}
	if got := resolve(st, flat("mcp__bridge__files_read"), "bridge"); got.Via != ViaMCPPrefixed {
		t.Fatalf("server name not used: %+v", got)
	}
	if got := resolve(st, flat("mcp__sharedos__files_read"), "bridge"); got.Via != ViaNotOffered || got.Name != "mcp__bridge__files_read" {
		t.Fatalf("wrong server accepted: %+v", got)
	}
}

func TestOfferedDisplay(t *testing.T) {
	for _, c := range []struct {
		tool offeredTool
		want string
	}{
		{offeredTool{Name: "mcp__sharedos__echo"}, "mcp__sharedos__echo"},
		{offeredTool{Name: "echo", Namespace: "mcp__sharedos"}, "mcp__sharedos__echo"},
		{offeredTool{Name: "exec", Namespace: "functions"}, "exec"},
	} {
		if got := c.tool.display(); got != c.want {
			t.Errorf("display(%+v) = %q, want %q", c.tool, got, c.want)
		}
	}
}
