package mcp

// ListenFilter is the notifications object of subscriptions/listen (what
// the stream opts in to) and of its acknowledgement (what the server
// agreed to deliver).
type ListenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// Wants reports whether the filter takes the list_changed notification method.
func (f *ListenFilter) Wants(method string) bool {
	switch method {
	case NotificationToolsListChanged:
		return f.ToolsListChanged
	case NotificationPromptsChanged:
		return f.PromptsListChanged
	case NotificationResourcesChanged:
		return f.ResourcesListChanged
	}
	return false
}

// Empty reports whether the filter opts in to nothing.
func (f ListenFilter) Empty() bool {
	return !f.ToolsListChanged && !f.PromptsListChanged && !f.ResourcesListChanged && len(f.ResourceSubscriptions) == 0
}
