// Package sandbox owns the processes of one run: it starts a command inside new
// network, PID and mount namespaces (plus a user namespace when not root) and a cgroup,
// creates the listeners the caller asks for inside the network namespace and hands them
// back, relays the little egress the run allows (loopback mirrors and an HTTP CONNECT
// proxy), builds the command's environment and file view, forwards signals, enforces
// limits and the timeout, and makes sure nothing the command started outlives the run.
//
// It knows nothing about MCP or harnesses: a caller (the launcher) serves whatever it
// likes on the listeners it gets back, then releases the command with [Sandbox.Go].
//
// The re-exec model: the calling binary must dispatch [StubArg] to [RunStub] at the very
// top of main, before anything else runs. Start re-executes /proc/self/exe with that
// argument as the first process of the new namespaces (the "stub"); the stub brings lo
// up, opens the listeners, passes their descriptors back over a socketpair, builds the
// mount view, waits for "go", then runs the command as PID 1's child and reaps
// everything until the command exits.
//
// Fail closed: when a confinement the Spec asks for cannot be had, Start returns an error
// naming what is missing and how to get it; it never runs the command less confined.
package sandbox
