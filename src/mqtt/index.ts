// The MQTT domain's public face: the broker the composition root starts and the broker admin reads.
export { createMqttBroker, type MqttBroker, type MqttConfig, type MqttConnection, type MqttSnapshot } from './broker.js';
export { MQTT_WS_PATH, registerMqttWebSocket } from './websocket.js';
export { channelTopic, parsePublishTopic, parseSubscribeFilter } from './topics.js';
