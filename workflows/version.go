package workflows

// Version is eve's version, reported in session.started.
const Version = "0.1.0"
