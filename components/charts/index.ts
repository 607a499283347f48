export { extent, flatPadding, formatValue, type ValueAxis, valueAxis } from "./value-axis";
export { secondsAxis, stepAxis } from "./x-axis";
