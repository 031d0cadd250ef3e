// Validates deploy/kubernetes: every document against the Kubernetes and Gateway API schemas (the
// kubernetes-models packages: ajv over the upstream OpenAPI schemas), the InferencePool by hand
// (no package carries the Inference Extension's schema), and the references between them: the pool
// selects the prefixd pods and their port, names the picker's Service and port, the route sends to
// the pool, and the picker's KV event discovery, tokenizer and block size match what the pods
// publish. Prints {"prefixd_args": [...], "metrics": [...]} for run.sh to check against a real
// prefixd (its flags parse; the metric names the picker reads exist).
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { parse, parseAllDocuments } from "yaml";
import * as core from "kubernetes-models/v1";
import * as apps from "kubernetes-models/apps/v1";
import * as rbac from "kubernetes-models/rbac.authorization.k8s.io/v1";
import * as gateway from "@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1";

const dir = process.argv[2];
const failures = [];
const check = (ok, message) => { if (!ok) failures.push(message); };

const models = {
  "v1/Namespace": core.Namespace, "v1/Service": core.Service, "v1/ConfigMap": core.ConfigMap,
  "v1/ServiceAccount": core.ServiceAccount, "v1/PersistentVolumeClaim": core.PersistentVolumeClaim,
  "apps/v1/Deployment": apps.Deployment,
  "rbac.authorization.k8s.io/v1/Role": rbac.Role, "rbac.authorization.k8s.io/v1/RoleBinding": rbac.RoleBinding,
  "gateway.networking.k8s.io/v1/Gateway": gateway.Gateway, "gateway.networking.k8s.io/v1/HTTPRoute": gateway.HTTPRoute,
};

const kustomization = parse(readFileSync(join(dir, "kustomization.yaml"), "utf8"));
const files = readdirSync(dir).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml").sort();
check(JSON.stringify([...kustomization.resources].sort()) === JSON.stringify(files),
      `kustomization.yaml lists ${kustomization.resources} but the folder holds ${files}`);

const objects = [];
for (const file of files) {
  for (const doc of parseAllDocuments(readFileSync(join(dir, file), "utf8"))) {
    if (doc.errors.length) { failures.push(`${file}: ${doc.errors[0].message}`); continue; }
    const object = doc.toJS();
    if (!object) continue;
    const key = `${object.apiVersion}/${object.kind}`;
    const where = `${file}: ${object.kind} ${object.metadata?.name}`;
    objects.push({ key, object, where });
    if (key === "inference.networking.k8s.io/v1/InferencePool") continue;  // checked below
    const Model = models[key];
    if (!Model) { failures.push(`${where}: no schema for ${key}`); continue; }
    try {
      new Model(object).validate();
    } catch (error) {
      failures.push(`${where}: ${error.message}`);
    }
  }
}
const find = (key, name) => objects.find((o) => o.key === key && o.object.metadata.name === name)?.object;
const all = (key) => objects.filter((o) => o.key === key).map((o) => o.object);

const report = () => {
  for (const f of failures) console.error(`deploy/kubernetes: ${f}`);
  process.exit(1);
};
process.on("uncaughtException", (error) => {
  failures.push(`a reference between the documents is missing: ${error.message}`);
  report();
});

// The InferencePool (inference.networking.k8s.io/v1).
const pool = all("inference.networking.k8s.io/v1/InferencePool")[0];
check(pool, "no InferencePool");
const labels = pool?.spec?.selector?.matchLabels ?? {};
check(Object.keys(labels).length > 0, "the InferencePool selects no labels");
check(Array.isArray(pool?.spec?.targetPorts) && pool.spec.targetPorts.every((p) => Number.isInteger(p.number) && p.number > 0 && p.number < 65536),
      "the InferencePool's targetPorts are not [{number}]");
const pickerRef = pool?.spec?.endpointPickerRef;
check(pickerRef?.name && Number.isInteger(pickerRef?.port?.number), "the InferencePool has no endpointPickerRef {name, port.number}");

// The prefixd pods.
const prefixd = find("apps/v1/Deployment", "prefixd");
const pod = prefixd.spec.template;
const container = pod.spec.containers.find((c) => c.name === "prefixd");
const args = container.args;
const flag = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
for (const [k, v] of Object.entries(labels)) check(pod.metadata.labels[k] === v, `the pool selects ${k}=${v}, which the prefixd pods lack`);
const http = container.ports.find((p) => p.name === "http").containerPort;
check(pool.spec.targetPorts[0].number === http, `the pool targets port ${pool.spec.targetPorts[0].number}, prefixd listens on ${http}`);
check(String(http) === flag("port"), "the http containerPort is not --port");
const eventsPort = Number(flag("kv-events-endpoint").split(":").pop());
check(container.ports.some((p) => p.containerPort === eventsPort), "the KV events port is not a containerPort");
check(args[0] === "serve", "prefixd's first argument is not serve");

// The picker.
const service = find("v1/Service", pickerRef.name);
check(service?.spec?.ports?.some((p) => p.port === pickerRef.port.number), `the pool's picker ${pickerRef.name}:${pickerRef.port.number} is no Service port`);
const picker = find("apps/v1/Deployment", "prefixd-epp");
const pickerArgs = picker.spec.template.spec.containers[0].args;
const pickerFlag = (name) => pickerArgs.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
check(pickerFlag("pool-name") === pool.metadata.name, "the picker's --pool-name is not the pool");
const configMap = find("v1/ConfigMap", picker.spec.template.spec.volumes.find((v) => v.configMap).configMap.name);
const config = parse(configMap.data["epp.yaml"]);
check(config.kind === "EndpointPickerConfig", "the picker's config is not an EndpointPickerConfig");
const scorer = config.plugins.find((p) => p.type === "precise-prefix-cache-scorer");
check(scorer, "the picker runs no precise-prefix-cache-scorer");
const events = scorer.parameters.kvEventsConfig;
check(events.discoverPods === true && events.podDiscoveryConfig.socketPort === eventsPort,
      `the picker subscribes to port ${events.podDiscoveryConfig?.socketPort}, prefixd publishes on ${eventsPort}`);
const [selectorKey, selectorValue] = events.podDiscoveryConfig.podLabelSelector.split("=");
check(pod.metadata.labels[selectorKey] === selectorValue, "the picker's podLabelSelector does not select the prefixd pods");
check(events.podDiscoveryConfig.podNamespace === kustomization.namespace, "the picker watches another namespace");
check(flag("kv-events-topic").startsWith(events.topicFilter), "prefixd's topic does not pass the picker's topicFilter");
check(flag("kv-events-topic").endsWith(`@${flag("alias")}`), "prefixd's topic does not end with its model (--alias)");
check(scorer.parameters.indexerConfig.tokenizersPoolConfig.modelName === flag("alias"), "the picker tokenizes another model");
check(scorer.parameters.tokenProcessorConfig.blockSize === Number(flag("apc-block-size") ?? 16), "block sizes differ");
const profiles = config.schedulingProfiles.flatMap((p) => p.plugins.map((r) => r.pluginRef));
for (const plugin of config.plugins) check(plugin.type === "single-profile-handler" || profiles.includes(plugin.type), `${plugin.type} is in no profile`);

// The route.
const route = all("gateway.networking.k8s.io/v1/HTTPRoute")[0];
const backend = route.spec.rules[0].backendRefs[0];
check(backend.kind === "InferencePool" && backend.name === pool.metadata.name && backend.group === "inference.networking.k8s.io",
      "the HTTPRoute does not send to the InferencePool");
check(route.spec.parentRefs[0].name === all("gateway.networking.k8s.io/v1/Gateway")[0].metadata.name, "the HTTPRoute's parent is not the Gateway");
// The shared tier.
const valkey = find("v1/Service", "valkey");
check(flag("cache-remote") === `redis://valkey:${valkey.spec.ports[0].port}`, "--cache-remote is not the valkey Service");

const metrics = ["total-queued-requests-metric", "total-running-requests-metric", "kv-cache-usage-percentage-metric",
                 "cache-info-metric"].map(pickerFlag);
check(pickerFlag("lora-info-metric") === "", "prefixd serves no adapters: --lora-info-metric must be empty");
if (failures.length) report();
console.log(JSON.stringify({ prefixd_args: args, metrics, documents: objects.length }));
