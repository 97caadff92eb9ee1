// Scenario: the reference for mqtt-publish-window: the same pipelined load against the machine's Mosquitto.
import { mosquittoScenario } from './mqtt-mosquitto.js';

export default mosquittoScenario('mqtt-mosquitto-window', 16);
