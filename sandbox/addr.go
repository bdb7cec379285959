package sandbox

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// allowEntry is one --allow-egress host:port.
type allowEntry struct {
	host string // lower-case name, or an IP literal
	port int
	ip   netip.Addr // valid when host is an IP literal
}

// Compiled on first use, not at start: the binary starts twice per run (launcher, stub).
var hostLabel = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`) })

// parseAllow checks an allowlist entry. Names must be plain DNS names; IP literals are
// accepted (the operator named them) but never link-local or metadata addresses.
func parseAllow(entry string) (allowEntry, error) {
	host, port, err := splitHostPort(entry)
	if err != nil {
		return allowEntry{}, fmt.Errorf("--allow-egress %q: %w", entry, err)
	}
	a := allowEntry{host: host, port: port}
	if ip, err := netip.ParseAddr(host); err == nil {
		if why := alwaysRefused(ip); why != "" {
			return allowEntry{}, fmt.Errorf("--allow-egress %q: %s addresses are never allowed", entry, why)
		}
		a.ip = ip
	}
	return a, nil
}

// splitHostPort parses host:port strictly: a valid DNS name or IP literal, a numeric
// port; no CR/LF, spaces, user info or trailing dots.
func splitHostPort(hp string) (string, int, error) {
	host, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != p {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	host = strings.ToLower(host)
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return "", 0, fmt.Errorf("zoned address %q", host)
		}
		return ip.Unmap().String(), port, nil
	}
	if err := validName(host); err != nil {
		return "", 0, err
	}
	return host, port, nil
}

func validName(host string) error {
	if len(host) == 0 || len(host) > 253 {
		return fmt.Errorf("bad host name length %d", len(host))
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if !hostLabel().MatchString(l) {
			return fmt.Errorf("bad host name %q", host)
		}
	}
	// A numeric last label is an IPv4 address in a form netip refuses (2130706433,
	// 0x7f.1, 127.1); resolvers would turn it into an address without asking DNS.
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" || (strings.HasPrefix(last, "0x") && strings.Trim(last[2:], "0123456789abcdef") == "") {
		return fmt.Errorf("host %q looks like a numeric address", host)
	}
	return nil
}

var (
	metadataAddrs = []netip.Addr{
		netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack
		netip.MustParseAddr("fd00:ec2::254"),   // AWS IPv6
		netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	}
	cgnat = netip.MustParsePrefix("100.64.0.0/10")
)

// alwaysRefused names why ip may never be reached, even when named explicitly.
func alwaysRefused(ip netip.Addr) string {
	ip = ip.Unmap()
	for _, m := range metadataAddrs {
		if ip == m {
			return "metadata"
		}
	}
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
		return "link-local"
	}
	if ip.IsUnspecified() || ip.IsMulticast() {
		return "unspecified or multicast"
	}
	return ""
}

// refusedAfterResolve names why an address a name resolved to may not be used: private,
// loopback, link-local, metadata. A name must lead to the public internet.
func refusedAfterResolve(ip netip.Addr) string {
	ip = ip.Unmap()
	if why := alwaysRefused(ip); why != "" {
		return why
	}
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate(), cgnat.Contains(ip):
		return "private"
	}
	return ""
}

// egressPolicy decides CONNECT and plain-HTTP targets.
type egressPolicy struct {
	allow    map[string]allowEntry // "host:port"
	resolver *net.Resolver
}

func newEgressPolicy(entries []string) (*egressPolicy, error) {
	p := &egressPolicy{allow: map[string]allowEntry{}, resolver: net.DefaultResolver}
	for _, e := range entries {
		a, err := parseAllow(e)
		if err != nil {
			return nil, err
		}
		p.allow[net.JoinHostPort(a.host, strconv.Itoa(a.port))] = a
	}
	return p, nil
}

// resolve returns the address to dial for target, or why it is refused.
func (p *egressPolicy) resolve(ctx context.Context, target string) (string, error) {
	host, port, err := splitHostPort(target)
	if err != nil {
		return "", fmt.Errorf("malformed target: %w", err)
	}
	key := net.JoinHostPort(host, strconv.Itoa(port))
	a, ok := p.allow[key]
	if !ok {
		return "", fmt.Errorf("%s is not in the egress allowlist", key)
	}
	if a.ip.IsValid() {
		return net.JoinHostPort(a.ip.String(), strconv.Itoa(port)), nil
	}
	addrs, err := p.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("resolve %s: no address", host)
	}
	// One bad address refuses the name: a name that mixes public and private answers is
	// the shape of a rebinding attack.
	for _, ip := range addrs {
		if why := refusedAfterResolve(ip); why != "" {
			return "", fmt.Errorf("%s resolves to %s, a %s address", host, ip, why)
		}
	}
	return net.JoinHostPort(addrs[0].Unmap().String(), strconv.Itoa(port)), nil
}
