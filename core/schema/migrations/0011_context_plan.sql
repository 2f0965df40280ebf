-- Before every model request the runner decides which of a session's
-- oldest exchanges the request leaves out (runner.planTranscript). It
-- reads the messages a request sends, newest first, until the context
-- size is passed: messages_sent holds them but the tool results, so the
-- read walks no result. How many request messages the exchanges left
-- out stand for is then counted from the indexes alone: the session's
-- messages but its results (messages_sent), and its tool calls
-- (tool_calls_by_session), each of which is sent with a result. Read
-- row by row instead, 20,000 messages took 700 ms every step
-- (BenchmarkPlanTranscriptOfALongSession).
CREATE INDEX messages_sent ON messages (session_id, seq, role) WHERE role != 'tool';
CREATE INDEX tool_calls_by_session ON tool_calls (session_id);
