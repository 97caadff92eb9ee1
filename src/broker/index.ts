// The broker domain's public face: node registry (leadership for single-runner jobs), admin routes, stats.
export { createNodeRegistry, type ClusterNode, type ClusterView, type NodeRegistry } from './node-registry.js';
export { registerBrokerAdminRoutes, type BrokerAdminDeps } from './routes.js';
export { amqpZeros, buildStats, queueStats, type BrokerStats } from './stats.js';
