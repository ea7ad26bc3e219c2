package protocol

// SubagentHop is one step from a root session down to a subagent's child
// session: the subagent's name and the child's session id.
type SubagentHop struct {
	Agent     string `json:"agent"`
	SessionID string `json:"sessionId"`
}

// SubagentOrigin places a subagent's child session under the root session
// its people answer through: RootSessionID, and Path from the root's child
// down to the session itself (its depth is len(Path)). A root session has
// none.
type SubagentOrigin struct {
	RootSessionID string        `json:"rootSessionId"`
	Path          []SubagentHop `json:"path"`
}

// Child is the origin of a child session sessionID of subagent agent,
// started by a session whose origin is o (nil: a root session, parent).
func (o *SubagentOrigin) Child(parent, agent, sessionID string) *SubagentOrigin {
	c := &SubagentOrigin{RootSessionID: parent}
	if o != nil {
		c.RootSessionID = o.RootSessionID
		c.Path = append(c.Path, o.Path...)
	}
	c.Path = append(c.Path, SubagentHop{Agent: agent, SessionID: sessionID})
	return c
}

// Depth is how many subagents down the session is: 0 for a root.
func (o *SubagentOrigin) Depth() int {
	if o == nil {
		return 0
	}
	return len(o.Path)
}
