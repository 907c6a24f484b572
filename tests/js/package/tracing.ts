// The tracing option with the real OpenTelemetry API's types: the module itself is an
// OpenTelemetryAPI and its tracers are Tracers, as clientmcp.d.ts declares them structurally
// (the package imports nothing). tests/js/test_js_package.py type-checks it with `tsc --strict`.
import * as api from "@opentelemetry/api";
import { ClientMCP, type TracingOptions } from "clientmcp";

const url = "ws://127.0.0.1:8080/connect";
export const withDefaultTracer = new ClientMCP({ url, token: "eyJ...", tracing: { api } });
const tracing: TracingOptions = { api, tracer: api.trace.getTracer("my-app", "1.0.0") };
export const withOwnTracer = new ClientMCP({ url, token: "eyJ...", tracing });
withOwnTracer.expose("export_report", {
  risk: "observe",
  handler: async (args: { month: string }, { report, traceparent, tracestate }) => {
    // Inside the span: the handler's own spans are its children.
    const span = api.trace.getActiveSpan();
    span?.setAttribute("app.month", args.month);
    report(0, 10);
    report(10, 10, `Exported ${args.month}`);
    return { month: args.month, traced: traceparent !== null, vendor: tracestate ?? "" };
  },
});
// @ts-expect-error the API module, not the tracer provider
new ClientMCP({ url, token: "eyJ...", tracing: { api: api.trace } });
