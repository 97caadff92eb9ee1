// Scenario: mqtt-publish with 16 QoS 1 PUBLISHes in flight per client (pipelined, as MQTT clients send
// them), so the group-commit writer sees full batches; compare mqtt-mosquitto-window.
import { publishScenario } from './mqtt-publish.js';

export default publishScenario('mqtt-publish-window', 16);
